#include "record/job_record.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "common/atomic_file.hpp"
#include "davincirun/enum_names.hpp"
#include "davincirun/root_cause.hpp"

namespace davincirun::detail {

namespace {

RecordJson time_of(WallClock::time_point t) {
  return t.time_since_epoch().count() == 0 ? RecordJson() : RecordJson(seconds_since_epoch(t));
}

RecordJson rank_id(const RankResult& r) { return r.role == ProcessRole::scheduler ? RecordJson() : RecordJson(r.rank); }

const char* ended_how(const RankResult& r) {
  if (r.ended.time_since_epoch().count() == 0) return "running";
  if (r.status.success()) return "exited";
  if (r.killed_by_launcher) return "killed";
  if (r.terminated_by_launcher) return "stopped";
  return "failed";
}

RecordJson activity_of(const ActivityHistory& a) {
  RecordJson bytes = RecordJson::array();
  for (auto b : a.buckets()) bytes.push_back(b);
  return {{"start", seconds_since_epoch(a.start())}, {"step_s", a.step_s()}, {"bytes", std::move(bytes)}};
}

RecordJson progress_of(const ProgressHistory& p, std::int64_t per_epoch) {
  RecordJson samples = RecordJson::array();
  const auto& all = p.samples();
  for (std::size_t i = 0; i < all.size(); ++i) {
    // The text of the last sample only: the record stays small at 1,024 ranks.
    samples.push_back({seconds_since_epoch(all[i].time), ProgressHistory::position_of(all[i], per_epoch),
                       i + 1 == all.size() ? p.text() : std::string()});
  }
  return samples;
}

RecordJson slow_of(const std::vector<SlowSpell>& spells) {
  RecordJson out = RecordJson::array();
  for (const auto& s : spells) {
    out.push_back({{"from", seconds_since_epoch(s.from)},
                   {"to", s.to ? RecordJson(seconds_since_epoch(*s.to)) : RecordJson()},
                   {"detail", s.detail}});
  }
  return out;
}

RecordJson rank_entry(const ServerRecordInput& in, std::size_t i) {
  const RankResult& r = in.result.ranks[i];
  const RankAssignment& a = in.spec.ranks[i];
  const ExitStatus& s = r.status;
  const bool ended = r.ended.time_since_epoch().count() != 0;
  RecordJson j = {
      {"role", to_string(r.role)},
      {"rank", r.role == ProcessRole::scheduler ? -1 : r.rank},
      {"local_rank", a.local_rank},
      {"server_id", in.spec.server_id},
      {"physical_device_id", a.physical_device_id},
      {"logical_device_id", a.logical_device_id},
      {"pid", r.pid},
      {"log", r.log_path},
      {"started", time_of(r.started)},
      {"ended", time_of(r.ended)},
      {"exit_code", ended && s.kind == ExitStatus::Kind::exited ? RecordJson(s.value) : RecordJson()},
      {"signal", ended && s.kind == ExitStatus::Kind::signaled ? RecordJson(s.value) : RecordJson()},
      {"status", ended ? s.describe() : std::string("running")},
      {"ended_how", ended_how(r)},
      {"output_bytes", r.output_bytes},
  };
  const JobProgress* p = in.progress != nullptr && i < in.progress->size() ? in.progress : nullptr;
  j["activity"] = p != nullptr ? activity_of(p->activity(i)) : RecordJson();
  j["progress"] = p != nullptr ? progress_of(p->progress_of(i), p->steps_per_epoch()) : RecordJson::array();
  j["slow"] = p != nullptr ? slow_of(p->slow_spells(i)) : RecordJson::array();
  j["metrics"] = r.role == ProcessRole::rank ? read_metrics(metrics_file(in.run_dir, r.rank)) : RecordJson::object();
  return j;
}

// The exception's first line among the block's lines.
RecordJson highlighted(const std::vector<std::string>& lines, const std::string& exception) {
  RecordJson out = RecordJson::array();
  const std::string first = exception.substr(0, exception.find('\n'));
  for (std::size_t i = 0; !first.empty() && i < lines.size(); ++i) {
    if (lines[i].find(first) != std::string::npos) out.push_back(i);
  }
  return out;
}

RecordJson root_cause_of(const ServerRecordInput& in) {
  if (!in.result.first_failure) return RecordJson();
  const RankResult& r = in.result.ranks[*in.result.first_failure];
  const RootCause cause = rank_root_cause(r.log_path);
  std::vector<std::string> lines;
  for (std::size_t b = 0; b < cause.text.size();) {
    const auto e = cause.text.find('\n', b);
    lines.push_back(cause.text.substr(b, e == std::string::npos ? std::string::npos : e - b));
    b = e == std::string::npos ? cause.text.size() : e + 1;
  }
  const std::string& headline = !cause.exception.empty() ? cause.exception : cause.error_code;
  return {{"role", to_string(r.role)},
          {"rank", rank_id(r)},
          {"server_id", in.spec.server_id},
          {"exception", headline},
          {"log", r.log_path},
          {"lines", lines},
          {"highlight", highlighted(lines, headline)}};
}

// One event of process `r` on this server.
RecordJson rank_event(const ServerRecordInput& in, const RankResult& r, WallClock::time_point time, const char* kind,
                      const std::string& what) {
  return {{"time", seconds_since_epoch(time)},
          {"server_id", in.spec.server_id},
          {"kind", kind},
          {"role", to_string(r.role)},
          {"rank", rank_id(r)},
          {"text", process_name(r.role, r.rank) + what}};
}

RecordJson exit_events(const ServerRecordInput& in) {
  RecordJson out = RecordJson::array();
  for (const RankResult& r : in.result.ranks) {
    if (r.ended.time_since_epoch().count() == 0) continue;
    const char* how = r.killed_by_launcher       ? " (killed after the grace period)"
                      : r.terminated_by_launcher ? " (stopped by the launcher)"
                                                 : "";
    out.push_back(rank_event(in, r, r.ended, "exit", ": " + r.status.describe() + how));
  }
  return out;
}

RecordJson slow_events(const ServerRecordInput& in) {
  RecordJson out = RecordJson::array();
  if (in.progress == nullptr) return out;
  for (std::size_t i = 0; i < in.result.ranks.size() && i < in.progress->size(); ++i) {
    const RankResult& r = in.result.ranks[i];
    for (const auto& s : in.progress->slow_spells(i)) {
      out.push_back(rank_event(in, r, s.from, "slow", " is slow: " + s.detail));
      if (s.to) out.push_back(rank_event(in, r, *s.to, "slow", " is no longer slow"));
    }
  }
  return out;
}

// Every time in a part, moved by `offset` seconds.
void shift(RecordJson& value, const char* key, double offset) {
  auto it = value.find(key);
  if (it != value.end() && it->is_number()) *it = it->get<double>() + offset;
}

void align(RecordJson& part, double offset) {
  if (offset == 0) return;
  for (auto& r : part["ranks"]) {
    shift(r, "started", offset);
    shift(r, "ended", offset);
    if (r["activity"].is_object()) shift(r["activity"], "start", offset);
    for (auto& p : r["progress"]) p[0] = p[0].get<double>() + offset;
    for (auto& s : r["slow"]) {
      shift(s, "from", offset);
      shift(s, "to", offset);
    }
    for (auto& [name, points] : r["metrics"].items()) {
      for (auto& p : points) p[2] = p[2].get<double>() + offset;
    }
  }
  for (auto& e : part["events"]) shift(e, "time", offset);
}

}  // namespace

std::string metrics_file(const std::string& run_dir, int rank) {
  return run_dir + "/metrics/rank_" + std::to_string(rank) + ".jsonl";
}

RecordJson server_part(const ServerRecordInput& in) {
  RecordJson part;
  part["server"] = {{"server_id", in.spec.server_id},
                    {"run_dir", in.run_dir},
                    {"ranks", in.result.ranks.size()},
                    {"clock_offset_s", 0.0},
                    {"clock_error_s", 0.0},
                    {"success", in.result.success()},
                    {"stop_reason", to_string(in.result.stop_reason)}};
  part["ranks"] = RecordJson::array();
  for (std::size_t i = 0; i < in.result.ranks.size() && i < in.spec.ranks.size(); ++i) {
    part["ranks"].push_back(rank_entry(in, i));
  }
  RecordJson events = journal_events(in.journal, in.spec.server_id);
  for (auto& e : exit_events(in)) events.push_back(std::move(e));
  for (auto& e : slow_events(in)) events.push_back(std::move(e));
  part["events"] = std::move(events);
  part["root_cause"] = root_cause_of(in);
  return part;
}

RecordJson job_record(const JobSpec& spec, const JobResult& result, std::vector<AlignedPart> parts,
                      const std::string& clock_method, const std::vector<MissingServer>& missing) {
  RecordJson servers = RecordJson::array();
  RecordJson ranks = RecordJson::array();
  RecordJson events = RecordJson::array();
  RecordJson causes = RecordJson::array();  // each server's first failure's
  double max_error = 0;
  for (auto& p : parts) {
    align(p.part, p.offset_s);
    p.part["server"]["clock_offset_s"] = p.offset_s;
    p.part["server"]["clock_error_s"] = p.measured ? RecordJson(p.error_s) : RecordJson();
    max_error = std::max(max_error, p.error_s);
    servers.push_back(p.part["server"]);
    for (auto& r : p.part["ranks"]) ranks.push_back(std::move(r));
    for (auto& e : p.part["events"]) events.push_back(std::move(e));
    if (!p.part["root_cause"].is_null()) causes.push_back(std::move(p.part["root_cause"]));
  }
  std::stable_sort(ranks.begin(), ranks.end(), [](const RecordJson& a, const RecordJson& b) {
    return a["rank"].get<int>() < b["rank"].get<int>();
  });
  std::stable_sort(events.begin(), events.end(), [](const RecordJson& a, const RecordJson& b) {
    return a["time"].get<double>() < b["time"].get<double>();
  });
  double started = 0;
  double ended = 0;
  for (const auto& r : ranks) {
    if (r["started"].is_number() && (started == 0 || r["started"].get<double>() < started)) started = r["started"];
    if (r["ended"].is_number()) ended = std::max(ended, r["ended"].get<double>());
  }
  if (!result.attempts.empty()) started = seconds_since_epoch(result.attempts.front().started);
  // The first failure: the earliest failed rank's exit on the time line.
  RecordJson first_failure;
  for (const auto& r : ranks) {
    if (r["ended_how"] != "failed") continue;
    if (first_failure.is_null() || r["ended"].get<double>() < first_failure["time"].get<double>()) {
      first_failure = {{"role", r["role"]},
                       {"rank", r["role"] == "scheduler" ? RecordJson() : r["rank"]},
                       {"server_id", r["server_id"]},
                       {"time", r["ended"]},
                       {"status", r["status"]}};
    }
  }
  // The root cause: that of the first failure's server (the first server's without one).
  RecordJson root_cause = causes.empty() ? RecordJson() : causes.front();
  for (const auto& c : causes) {
    if (!first_failure.is_null() && c["server_id"] == first_failure["server_id"]) root_cause = c;
  }
  RecordJson absent = RecordJson::array();
  for (const auto& m : missing) absent.push_back({{"server_id", m.server_id}, {"why", m.why}});
  RecordJson attempts = RecordJson::array();
  for (const auto& a : result.attempts) {
    attempts.push_back(
        {{"attempt", a.attempt},
         {"started", time_of(a.started)},
         {"ended", time_of(a.ended)},
         {"stop_reason", to_string(a.stop_reason)},
         {"stop_detail", a.stop_detail},
         {"first_failure", !a.first_failure                                  ? RecordJson()
                           : a.first_failure->role == ProcessRole::scheduler ? RecordJson("scheduler")
                                                                             : RecordJson(a.first_failure->rank)},
         {"root_cause", a.root_cause},
         {"restarted", a.restarted},
         {"decision", a.decision}});
  }
  RecordJson j;
  j["format"] = job_record_format;
  j["job_id"] = spec.job_id;
  j["command"] = spec.command;
  j["world_size"] = spec.world_size;
  j["clock"] = {{"reference_server", spec.server_id}, {"method", clock_method}, {"max_error_s", max_error}};
  // Where the job's record (every server's part) is: rank 0's server.
  const bool several = spec.peers.server_count > 1 && spec.peers.hub_index < spec.peers.server_ids.size();
  j["job_record_server"] = several ? spec.peers.server_ids[spec.peers.hub_index] : spec.server_id;
  j["started"] = started;
  j["ended"] = ended;
  j["success"] = result.success();
  j["exit_code"] = result.exit_code();
  j["stop_reason"] = to_string(result.stop_reason);
  j["stop_detail"] = result.stop_detail.empty() ? RecordJson() : RecordJson(result.stop_detail);
  j["first_failure"] = std::move(first_failure);
  j["root_cause"] = std::move(root_cause);
  j["servers"] = std::move(servers);
  j["missing_servers"] = std::move(absent);
  j["attempts"] = std::move(attempts);
  j["ranks"] = std::move(ranks);
  j["events"] = std::move(events);
  return j;
}

std::string record_text(const RecordJson& record) {
  return record.dump(-1, ' ', false, RecordJson::error_handler_t::replace);
}

void write_job_record(const std::string& path, std::string_view text) {
  std::string file;
  file.reserve(text.size() + 1);
  file.append(text).push_back('\n');
  write_file_atomically(path, file, 0600, "write " + path, Durability::page_cache);
}

}  // namespace davincirun::detail
