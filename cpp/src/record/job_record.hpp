// The job-wide record, <run>/job.json (docs/job-record.md): every server's
// ranks, how each ran (its output over time, its progress, when it was
// slow, its metrics) and ended, the job's events on one time line, the
// first failure and its root cause. Each server makes its part
// (ServerPart); the record joins the parts of every server heard from.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "davincirun/job_types.hpp"
#include "job/job_protocol.hpp"
#include "output/job_progress.hpp"
#include "record/record_json.hpp"

namespace davincirun::detail {

using RecordJson = nlohmann::ordered_json;

/// One line of the job's journal (events.txt) and when it was written.
struct JournalEntry {
  WallClock::time_point time;
  std::string text;
};

/// What one server knows at the end of its job.
struct ServerRecordInput {
  const JobSpec& spec;
  const JobResult& result;
  std::string run_dir;
  const std::vector<JournalEntry>& journal;
  const JobProgress* progress = nullptr;  ///< none: no activity, progress or slow spells
};

/// This server's part: {"server": {...}, "ranks": [...], "events": [...]},
/// its times on its own clock. Reads the ranks' metrics files
/// (DAVINCIRUN_METRICS_FILE) and, for a rank that failed first here, its
/// log's root cause. Never throws but std::bad_alloc.
RecordJson server_part(const ServerRecordInput& input);

/// The record of a job from the parts of its servers (the first: rank 0's,
/// whose clock is the record's), each with the offset that aligns its
/// clock to that one (seconds, added to its times) and the worst error of
/// that alignment. `result` is the job's end as rank 0's server knows it.
struct AlignedPart {
  RecordJson part;
  double offset_s = 0;
  double error_s = 0;
  bool measured = true;  ///< false: no offset could be measured, its times are on its own clock
};
/// A server whose part the record lacks, and why ("was lost: ...").
struct MissingServer {
  std::string server_id;
  std::string why;
};
RecordJson job_record(const JobSpec& spec, const JobResult& result, std::vector<AlignedPart> parts,
                      const std::string& clock_method, const std::vector<MissingServer>& missing = {});

/// Where rank id `rank` of the job in `run_dir` writes its log_metric()
/// records (DAVINCIRUN_METRICS_FILE; docs/metrics.md).
std::string metrics_file(const std::string& run_dir, int rank);

/// `record` as the compact text that job.json holds (with a newline after
/// it), the page embeds and the hub sends its members: invalid UTF-8 in
/// rank output replaced, so any JSON reader takes it.
std::string record_text(const RecordJson& record);

/// Writes `text` (record_text()) and a newline to `path`, replaced
/// atomically, mode 0600. Throws SystemError.
void write_job_record(const std::string& path, std::string_view text);

/// The page (report.html) of a record given as record_text(), titled
/// `job_id`; written atomically, mode 0600 (throws SystemError).
std::string report_page(std::string_view text, std::string_view job_id);
void write_report_page(const std::string& path, std::string_view text, std::string_view job_id);

/// Whether `text` (a record another server sent) is a JSON object with
/// the record's "job_id" (then put in `job_id`), "servers" and "ranks";
/// checked by simdjson without building a document, so that each of
/// hundreds of members writes what the hub sent in a fraction of a
/// millisecond. Never throws but std::bad_alloc.
bool record_text_shaped(std::string_view text, std::string& job_id);

/// The events of a journal: state changes, stops, restarts and notices
/// (a change that changed nothing is left out), in `server_id`'s words.
RecordJson journal_events(const std::vector<JournalEntry>& journal, const std::string& server_id);

/// Rank `rank`'s log_metric() records from `path`: {name: [[step|null,
/// value, time], ...]}, at most max_metric_points a name (evenly thinned,
/// the last kept) and max_metric_names names; a malformed line is skipped.
inline constexpr std::size_t max_metric_points = 1000;
inline constexpr std::size_t max_metric_names = 64;
RecordJson read_metrics(const std::string& path);

/// `part` (server_part()) as JSON text of at most `budget` bytes, for the
/// hub: its ranks' metrics thinned (fewer points a name, then none) until it
/// fits; "" when it does not even then.
std::string part_text(RecordJson part, std::size_t budget);

}  // namespace davincirun::detail
