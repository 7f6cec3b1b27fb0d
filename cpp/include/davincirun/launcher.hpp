// The launcher facade: rank table → this server's ranks → environment →
// supervised processes with per-rank log files. The CLI and the Python
// package are two thin front ends over these two calls.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "davincirun/device_allocation.hpp"
#include "davincirun/environment.hpp"
#include "davincirun/log_streamer.hpp"
#include "davincirun/rank_table.hpp"
#include "davincirun/rank_table_loader.hpp"
#include "davincirun/supervisor.hpp"

namespace davincirun {

/// The library version, e.g. "0.2.0".
const char* version() noexcept;

struct LaunchOptions {
  /// The command every rank runs (argv; no shell). Required.
  std::vector<std::string> command;
  /// Rank table file, or a directory holding jobstart_hccl.json or hccl.json;
  /// empty = the RANK_TABLE_FILE variable of `environment`.
  std::string rank_table_file;
  /// How long to wait for a table the platform is still writing (missing,
  /// empty, half-written or status "initializing"); 0 = no waiting. Default 300 s.
  std::chrono::milliseconds wait_timeout{300'000};
  /// Receives a line now and then while waiting for the table (may be empty).
  std::function<void(const std::string&)> progress;
  /// Called about once a second while waiting for the table; throwing ends
  /// the wait (may be empty). See RankTableLoadOptions::keep_waiting.
  std::function<void()> keep_waiting;
  /// Working directory of the ranks; relative paths in `command` resolve here. Default ".".
  std::string work_dir = ".";
  /// Where each run's directory of per-rank logs is created. Default "./log".
  std::string log_dir = "./log";
  /// This machine's server_id in the table. Without it the server is found
  /// from the environment and this machine's addresses and host name
  /// (server_identity.hpp); a multi-server table never falls back to its
  /// first server.
  std::optional<std::string> server_id;
  /// Extra variables for every rank; they win over inherited ones and the
  /// defaults, but not over the identity variables (see environment.hpp).
  std::vector<std::pair<std::string, std::string>> env;
  /// Where /dev/davinciN are looked for. Default "/dev".
  std::string device_dir = "/dev";
  /// Timing of stops and output draining.
  SupervisorOptions supervisor;
};

/// Everything decided before anything starts.
struct LaunchPlan {
  LaunchOptions options;
  RankTable table;
  std::size_t server_index = 0;      ///< this machine's server in `table`
  std::string server_reason;         ///< why, e.g. "server_id 10.0.0.11 is an address of this machine"
  JobEnvironment job;                  ///< job-wide values (job id, master address...)
  std::vector<RankAssignment> ranks;   ///< this server's ranks, by rank
  std::vector<Environment> environments;  ///< one per entry of `ranks`
  std::string work_dir;                ///< absolute
  std::string log_dir;                 ///< absolute; the run directory is made inside it
};

/// Finds, waits for, reads and validates the rank table, finds this machine's
/// server, assigns devices and builds each rank's environment from
/// `environment` (normally Environment::current()). Starts nothing and
/// creates nothing; `table.warnings` lists what was accepted with a warning.
/// Throws ConfigError, RankTableError or SystemError.
LaunchPlan plan_launch(const LaunchOptions& options, const Environment& environment);

/// A running job: its run directory, log files and rank processes.
class Job {
 public:
  /// Creates a new run directory `<log_dir>/<UTC time>-<job id>` (never an
  /// existing one; mode 0700), points `<log_dir>/latest` at it, writes there
  /// the normalized copy of the rank table the ranks read (`rank_table.json`,
  /// mode 0600: format 1.0/1.2, scalars as decimal strings; RANK_TABLE_FILE
  /// names it, so a platform rewriting its file cannot disturb the job),
  /// creates one log file per rank, `rank_<rank>.device_<physical id>.log`
  /// (mode 0600), and starts every rank. Console lines go to `console`,
  /// which must outlive the Job. Throws ConfigError (log dir unusable,
  /// SIGCHLD ignored by this process), SpawnError, SystemError; nothing is
  /// left running when it throws.
  Job(const LaunchPlan& plan, LineSink& console);

  /// Runs the event loop until the job is over (see Supervisor::run()), then
  /// writes `summary.json` into the run directory (mode 0600): the job, and
  /// per rank its devices, pid, log file, exit status, whether the launcher
  /// stopped it, start and end times (seconds since the epoch) and output
  /// bytes. A summary that cannot be written is reported as a notice.
  JobResult wait();
  /// Stops the job; see Supervisor::request_stop(). Thread- and signal-safe.
  void request_stop() noexcept { supervisor_->request_stop(); }
  /// Kills every rank at once; see Supervisor::request_kill().
  void request_kill() noexcept { supervisor_->request_kill(); }
  /// Sends `signal` to every running rank; see Supervisor::forward_signal().
  void forward_signal(int signal) noexcept { supervisor_->forward_signal(signal); }

  const std::string& run_dir() const noexcept { return run_dir_; }
  std::vector<pid_t> pids() const { return supervisor_->pids(); }

 private:
  LaunchPlan plan_;
  LineSink* console_;
  std::string run_dir_;
  std::string table_copy_;
  std::unique_ptr<Supervisor> supervisor_;
};

/// A plain-text account of a failed job for people: the first failed rank,
/// how it ended, its log file and the last `tail_lines` lines of that log,
/// then one line per other rank. Empty when `result.success()`.
std::string failure_report(const JobResult& result, std::size_t tail_lines = 20);

}  // namespace davincirun
