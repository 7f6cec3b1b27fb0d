// A job's run directory: <log_dir>/<UTC time>-<job id> (a job of several
// servers: <log_dir>/<job id>, named alike on every server), holding the
// rank table the ranks read, one log per rank and, at the end, summary.json.
#pragma once

#include <string>
#include <vector>

#include "davincirun/device_allocation.hpp"
#include "record/job_record.hpp"

namespace davincirun::detail {

class RunDir {
 public:
  /// Creates `log_dir` when missing (like mkdir -p, mode 0755 less the
  /// umask), then a new run directory in it (never an existing one; mode
  /// 0700), and writes there the ranks' copy of the rank table
  /// (rank_table.json, mode 0600). `alike_everywhere` (a job of several
  /// servers): the name is the job id alone, which every server derives
  /// the same, with ".1", ".2"... for a run of the same job id again; else
  /// the UTC time comes first. Throws ConfigError naming the path: a log
  /// directory that cannot be made or used, no room for the table.
  RunDir(const std::string& log_dir, const std::string& job_id, const std::string& rank_table_json,
         bool alike_everywhere = false);

  const std::string& path() const noexcept { return path_; }
  /// The rank table the ranks read (RANK_TABLE_FILE).
  const std::string& table_path() const noexcept { return table_path_; }
  /// Where rank `rank` logs (rank_log_file_name()); the log is created by its RankLog.
  std::string log_path(const RankAssignment& rank, int attempt = 1) const;
  std::string summary_path() const { return path_ + "/summary.json"; }
  /// The job's journal on this server (job_journal.hpp); not named *.log,
  /// which is every rank's log and only theirs.
  std::string events_path() const { return path_ + "/events.txt"; }
  /// The job-wide record (record/job_record.hpp).
  std::string record_path() const { return path_ + "/job.json"; }
  /// The record's page (davincirun/report.hpp).
  std::string report_path() const { return path_ + "/report.html"; }
  /// Where rank id `rank`'s log_metric() records go (DAVINCIRUN_METRICS_FILE,
  /// docs/job-record.md): one JSON object per line, every attempt's in one file;
  /// the folder is made by the first rank that writes.
  std::string metrics_path(int rank) const { return metrics_file(path_, rank); }

  /// Points <log_dir>/latest at this run, for `tail -f log/latest/rank_0...`.
  /// Best effort: replaced atomically, never when `latest` is not a symlink.
  void point_latest() const;
  /// For a job that never ran: removes the logs of `ranks`, the table, and
  /// the directory when it is then empty (nothing else is ever removed).
  void discard(const std::vector<RankAssignment>& ranks) const;

 private:
  std::string log_dir_;
  std::string path_;
  std::string table_path_;
};

}  // namespace davincirun::detail
