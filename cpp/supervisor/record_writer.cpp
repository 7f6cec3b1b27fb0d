#include "record_writer.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "common/text.hpp"

namespace davincirun::detail {

// What one server knows of its ranks for the job record.
ServerRecordInput record_input(const JobSpec& spec, const RunDir& run_dir, const JobResult& result,
                               const JobJournal* journal, const JobProgress* progress) {
  static const std::vector<JournalEntry> none;
  return {spec, result, run_dir.path(), journal != nullptr ? journal->entries() : none, progress};
}

// A member's part of the record, for the hub: within its share of what the
// hub holds (64 MiB for the whole job), and never over what it accepts.
std::string part_for_hub(const JobSpec& spec, const ServerRecordInput& input) {
  constexpr std::size_t job_bytes = std::size_t{64} << 20;
  const std::size_t servers = std::max<std::size_t>(1, spec.peers.server_count);
  return part_text(server_part(input), std::clamp<std::size_t>(job_bytes / servers, 256u << 10, max_record_part_bytes));
}

namespace {

// On the hub, every other server's part that came, put on this server's
// clock (peers/peer_clock.hpp); those missing, and why.
std::vector<AlignedPart> gathered_parts(const JobSpec& spec, const JobPeers* peers,
                                        std::vector<MissingServer>& missing) {
  std::vector<AlignedPart> parts;
  if (peers == nullptr || !spec.peers.hub) return parts;
  for (const GatheredServer& g : peers->gathered()) {
    const std::string& id = spec.peers.server_ids.at(g.server_index);
    RecordJson part = g.part.empty() ? RecordJson() : RecordJson::parse(g.part, nullptr, false);
    if (!part.is_object() || !part.contains("ranks") || !part.contains("events") || !part.contains("server")) {
      missing.push_back({id, g.part.empty() ? g.why : "its part was not a record part"});
      continue;
    }
    // No echoed heartbeat (a job shorter than a round trip): its own clock, said so.
    parts.push_back(
        {std::move(part), g.clock ? g.clock->offset_s : 0.0, g.clock ? g.clock->error_s : 0.0, g.clock.has_value()});
  }
  return parts;
}

std::string clock_method(const JobSpec& spec, const std::string& not_received) {
  if (spec.peers.server_count <= 1) return "one server: its own clock";
  if (!spec.peers.hub) {
    // Without the peer channel (--no-peers) the plan lists no server ids.
    const std::string hub = spec.peers.hub_index < spec.peers.server_ids.size()
                                ? fmt::format(" ({})", spec.peers.server_ids[spec.peers.hub_index])
                                : std::string();
    return fmt::format(
        "this server's part only, on its own clock: the job's record is on rank 0's server{}; not received here: {}",
        hub, not_received);
  }
  return "every server's offset to rank 0's server measured from the peer channel's heartbeats (NTP's method, the "
         "shortest round trip kept; error at most half of it)";
}

// A member's copy of the job's record, the text rank 0's server sent; ""
// when none came (`why` says so).
std::string received_record(const JobSpec& spec, JobPeers* peers, std::string& why, std::string& job_id) {
  if (peers == nullptr || spec.peers.hub || spec.peers.server_count <= 1) return {};
  std::string text = peers->await_record(why);
  if (text.empty() || record_text_shaped(text, job_id)) return text;
  why = "what rank 0's server sent was not a job record";
  return {};
}

}  // namespace

// The job record (job.json) and its page (report.html): on rank 0's server
// every server's part, sent on to the others; on another server that copy,
// or its own part when none came. Like the summary, never the job's end.
void write_record(const JobSpec& spec, const RunDir& run_dir, const ServerRecordInput& input, JobPeers* peers,
                  LineSink& console) {
  try {
    std::string not_received = "its agent takes no part in the job's peer channel";
    std::string job_id;
    std::string text = received_record(spec, peers, not_received, job_id);
    if (text.empty()) {
      std::vector<MissingServer> missing;
      std::vector<AlignedPart> parts;
      parts.push_back({server_part(input), 0.0, 0.0});
      for (auto& p : gathered_parts(spec, peers, missing)) parts.push_back(std::move(p));
      const RecordJson record =
          job_record(spec, input.result, std::move(parts), clock_method(spec, not_received), missing);
      text = record_text(record);
      job_id = spec.job_id;  // as job_record() wrote it
    }
    // One text for the file, the page and the members: rank output can be
    // any bytes, and record_text() gives valid UTF-8 only.
    write_job_record(run_dir.record_path(), text);
    write_report_page(run_dir.report_path(), text, job_id);
    if (peers != nullptr && spec.peers.hub) peers->share_record(text);
  } catch (const std::exception& e) {
    console.notice(
        notice_line(fmt::format("cannot write the job record or its report in {}: {}", run_dir.path(), e.what())));
  }
}

}  // namespace davincirun::detail
