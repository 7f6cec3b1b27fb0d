// `davincirun report`'s words on the terminal: what the page shows first,
// short enough to read after a failed job.
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "davincirun/report.hpp"
#include "record_json.hpp"

namespace davincirun {

namespace {

using detail::number_or;
using detail::text_or;
using nlohmann::json;

constexpr std::size_t slow_ranks_shown = 8;
// The order of ends in the counts: the telling ones first.
constexpr const char* ends_in_order[] = {"failed", "killed", "stopped", "running", "exited"};

std::string duration_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "unknown";
  if (seconds < 60) return fmt::format("{:.1f} s", seconds);
  const long whole = std::lround(seconds);
  if (whole < 3600) return fmt::format("{} min {} s", whole / 60, whole % 60);
  return fmt::format("{} h {:02} min", whole / 3600, whole % 3600 / 60);
}

std::string process_text(const json& item) {
  if (text_or(item, "role") == "scheduler") return "scheduler";
  const auto rank = item.find("rank");
  return rank != item.end() && rank->is_number_integer() ? fmt::format("rank {}", rank->get<long>()) : "a process";
}

std::string result_text(const json& record) {
  const auto success = record.find("success");
  if (success != record.end() && success->is_boolean() && success->get<bool>()) return "succeeded";
  const std::string detail = text_or(record, "stop_detail");
  const std::string reason = text_or(record, "stop_reason", "unknown");
  const auto code = record.find("exit_code");
  const std::string status = code != record.end() && code->is_number_integer()
                                 ? fmt::format(", exit status {}", code->get<long>())
                                 : std::string();
  return fmt::format("failed ({}{})", detail.empty() ? reason : detail, status);
}

std::string command_text(const json& command) {
  std::string out;
  for (const auto& word : command) {
    if (!out.empty()) out += ' ';
    out += word.is_string() ? word.get<std::string>() : word.dump();
  }
  return out;
}

void add_root_cause(std::string& out, const json& cause) {
  out += fmt::format("root cause ({} on {}, {}): {}\n", process_text(cause), text_or(cause, "server_id", "?"),
                     text_or(cause, "log", "no log"), text_or(cause, "exception", "no exception line found"));
  std::vector<std::size_t> marked;
  if (const auto h = cause.find("highlight"); h != cause.end() && h->is_array()) {
    for (const auto& i : *h) {
      if (i.is_number_unsigned()) marked.push_back(i.get<std::size_t>());
    }
  }
  const auto lines = cause.find("lines");
  if (lines == cause.end() || !lines->is_array()) return;
  for (std::size_t i = 0; i < lines->size(); ++i) {
    const json& line = (*lines)[i];
    const bool mark = std::find(marked.begin(), marked.end(), i) != marked.end();
    out += fmt::format("  {} {}\n", mark ? '>' : '|', line.is_string() ? line.get<std::string>() : line.dump());
  }
}

}  // namespace

std::string report_summary(std::string_view job_record_json, const std::string& source) {
  const json record = detail::parse_job_record(job_record_json, source);
  const double started = number_or(record, "started", NAN);
  std::string out = fmt::format("job {}: {}, {}, world size {}\n", text_or(record, "job_id"), result_text(record),
                                duration_text(number_or(record, "ended", NAN) - started),
                                static_cast<long>(number_or(record, "world_size", 0)));
  out += "command: " + command_text(record["command"]) + "\n";

  std::map<std::string, std::size_t> ends;
  std::vector<std::string> slow;
  std::size_t slow_count = 0;
  for (const json& rank : record["ranks"]) {
    ++ends[text_or(rank, "ended_how", "unknown")];
    const auto intervals = rank.find("slow");
    if (intervals == rank.end() || !intervals->is_array() || intervals->empty()) continue;
    if (++slow_count > slow_ranks_shown) continue;
    const json& last = intervals->back();
    slow.push_back(fmt::format("{} ({})", process_text(rank),
                               last.is_object() ? text_or(last, "detail", "slow") : std::string("slow")));
  }
  std::string servers;
  for (const json& server : record["servers"]) {
    servers += fmt::format("{}{} ({} rank(s))", servers.empty() ? "" : ", ", text_or(server, "server_id", "?"),
                           static_cast<long>(number_or(server, "ranks", 0)));
  }
  out += fmt::format("servers: {}\n", servers.empty() ? "none recorded" : servers);
  for (const json& missing : record.value("missing_servers", json::array())) {
    out += fmt::format("missing: server {}: {}\n", text_or(missing, "server_id", "?"), text_or(missing, "why", "?"));
  }
  // A member's own record: say where the job's is.
  const std::string job_server = text_or(record, "job_record_server", "");
  if (record["servers"].size() == 1 && !job_server.empty() &&
      text_or(record["servers"][0], "server_id", job_server) != job_server) {
    out += fmt::format(
        "this is server {}'s part of the job; the job's record, with every server, is on rank 0's "
        "server {}, under the same run name in its log directory\n",
        text_or(record["servers"][0], "server_id", "?"), job_server);
  }
  std::string counts;
  for (const char* how : ends_in_order) {
    if (const auto it = ends.find(how); it != ends.end()) {
      counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", it->second, how);
      ends.erase(it);
    }
  }
  for (const auto& [how, count] : ends) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", count, how);
  out += fmt::format("processes ended: {}\n", counts.empty() ? "none recorded" : counts);

  if (const auto first = record.find("first_failure"); first != record.end() && first->is_object()) {
    out += fmt::format(
        "first failure: {} on {}, {} s after the start: {}\n", process_text(*first), text_or(*first, "server_id", "?"),
        fmt::format("{:.2f}", number_or(*first, "time", started) - started), text_or(*first, "status", "?"));
  }
  if (const auto cause = record.find("root_cause"); cause != record.end() && cause->is_object()) {
    add_root_cause(out, *cause);
  }
  if (slow_count > 0) {
    std::string names;
    for (const auto& s : slow) names += (names.empty() ? "" : "; ") + s;
    if (slow_count > slow.size()) names += fmt::format("; and {} more", slow_count - slow.size());
    out += fmt::format("slow: {}\n", names);
  }
  const std::size_t attempts = record["attempts"].size();
  if (attempts > 1) out += fmt::format("attempts: {} ({} restart(s))\n", attempts, attempts - 1);
  out += fmt::format("events: {}\n", record["events"].size());
  return out;
}

}  // namespace davincirun
