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
  /// The ranks whose output is shown live (console, notebook); the others
  /// go to their log files only. nullopt (the default): every rank. Ranks
  /// not on this server are ignored (so [0] can be given on every server);
  /// ranks outside 0..world size-1 are a ConfigError.
  std::optional<std::vector<int>> ranks_to_show;
  /// Directories the job's supervisor process removes (recursively, never
  /// following symlinks) once the job is over, even when this process died
  /// meanwhile: e.g. a per-job compiler cache. Default: none.
  std::vector<std::string> remove_after_job;
  /// Timing of stops and output draining, and how exits are tracked (the
  /// variable DAVINCIRUN_PROCESS_TRACKING=pidfd|sigchld|automatic of
  /// `environment` overrides `automatic`; 4.19 kernels need sigchld, which
  /// automatic picks by itself).
  SupervisorOptions supervisor;
  /// The davincirun-supervisor executable. Empty (the default): the
  /// DAVINCIRUN_SUPERVISOR variable of this process, else
  /// `davincirun-supervisor` next to this process's executable, else the
  /// one installed with the library (<prefix>/libexec/davincirun/).
  std::string supervisor_program;
  /// Where the job locks its devices, so that a second job on any of them
  /// is refused at once with DeviceBusyError (device_lock.hpp). Empty (the
  /// default): the DAVINCIRUN_LOCK_DIR variable of `environment`, else
  /// /tmp/davincirun-locks (default_device_lock_dir). "off": no locking.
  /// Must be absolute: a relative value is a ConfigError.
  std::string device_lock_dir;
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
  std::string device_lock_dir;         ///< absolute; empty: the devices are not locked
};

/// Finds, waits for, reads and validates the rank table, finds this machine's
/// server, assigns devices and builds each rank's environment from
/// `environment` (normally Environment::current()), which also gives the
/// launcher's own variables (DAVINCIRUN_PROCESS_TRACKING,
/// DAVINCIRUN_LOCK_DIR). Starts nothing and creates nothing;
/// `table.warnings` lists what was accepted with a warning.
/// Throws ConfigError, RankTableError or SystemError.
LaunchPlan plan_launch(const LaunchOptions& options, const Environment& environment);

/// Where a Job's live console output goes when it is not a LineSink.
enum class ConsoleTarget {
  stdio,  ///< this process's stdout (the ranks' lines) and stderr (notices), written by the supervisor process
  none,   ///< nowhere: the log files only
};

/// A running job.
///
/// Process model: the Job starts one davincirun-supervisor process per job,
/// in a session of its own, holding one end of a socket pair (the
/// lifeline). That process is the parent of every rank and a child
/// subreaper, creates the run directory and writes the logs. When this
/// process exits or is killed, the lifeline closes and the supervisor stops
/// the job (SIGTERM, SIGKILL after the grace period); when the ranks are
/// done it SIGKILLs whatever they left running anywhere below it (a
/// double-forked, setsid() daemon included). This process never reaps a
/// child it did not start, installs no signal handler and does not become
/// a subreaper.
class Job {
 public:
  /// Starts the supervisor process, which locks the job's devices in
  /// LaunchPlan::device_lock_dir (held until it exits; DeviceBusyError, a
  /// ConfigError, when another job holds one: nothing is created or
  /// started then), creates a new run directory
  /// `<log_dir>/<UTC time>-<job id>` (never an existing one; mode 0700),
  /// points `<log_dir>/latest` at it, writes there the normalized copy of
  /// the rank table the ranks read (`rank_table.json`, mode 0600: format
  /// 1.0/1.2, scalars as decimal strings; RANK_TABLE_FILE names it, so a
  /// platform rewriting its file cannot disturb the job), creates one log
  /// file per rank, `rank_<rank>.device_<physical id>.log` (mode 0600), and
  /// starts every rank. Console lines, notices, progress lines and rank
  /// exits are relayed to `console` (every LineSink call; made from the
  /// threads that construct the Job and call wait()), which must outlive
  /// the Job. Throws DeviceBusyError, ConfigError (log dir or lock
  /// dir unusable, no supervisor executable), SpawnError, SystemError;
  /// nothing is left running when it throws.
  Job(const LaunchPlan& plan, LineSink& console);
  /// The same, with the console written by the supervisor process itself.
  Job(const LaunchPlan& plan, ConsoleTarget console);
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;
  /// A job not waited for is killed at once; returns once its supervisor
  /// process has ended (so nothing of the job is left).
  ~Job();

  /// Relays console lines until the job is over, and returns its result
  /// (see Supervisor::run()). The supervisor process has then written
  /// `summary.json` into the run directory (mode 0600): the job, and per
  /// rank its devices, pid, log file, exit status, whether the launcher
  /// stopped it, start and end times (seconds since the epoch) and output
  /// bytes. Call once. Throws SystemError or Error if the supervisor process
  /// died without a result: its ranks die with it (PR_SET_PDEATHSIG), and
  /// this call then SIGKILLs every process of this user still carrying the
  /// job's DAVINCIRUN_JOB_TAG (what the ranks started) before it throws.
  JobResult wait();
  /// Stops the job; see Supervisor::request_stop(). Thread- and signal-safe.
  void request_stop() noexcept;
  /// Kills every rank at once; see Supervisor::request_kill(). Same safety.
  void request_kill() noexcept;
  /// The same, saying that the job was dropped before it ended (what the
  /// destructor does with a running job). Same safety.
  void request_kill_dropped() noexcept;
  /// Sends `signal` (1..31) to every running rank's process group; see
  /// Supervisor::forward_signal(). Same safety.
  void forward_signal(int signal) noexcept;

  const std::string& run_dir() const noexcept { return run_dir_; }
  /// Process ids of the ranks, in the order of LaunchPlan::ranks.
  const std::vector<pid_t>& pids() const noexcept { return pids_; }
  /// Process id of the job's supervisor process.
  pid_t supervisor_pid() const noexcept;
  /// How the supervisor process tracks the ranks' exits.
  ProcessTracking tracking() const noexcept { return tracking_; }

 private:
  struct Connection;
  void start(const LaunchPlan& plan, int route);
  void send_command(const char* bytes, std::size_t size) noexcept;

  LineSink* console_ = nullptr;
  std::unique_ptr<Connection> connection_;
  int lifeline_fd_ = -1;  // a copy of the connection's, for signal handlers
  std::string run_dir_;
  std::vector<pid_t> pids_;
  std::string tag_;  // DAVINCIRUN_JOB_TAG of the ranks
  ProcessTracking tracking_ = ProcessTracking::pidfd;
  bool waited_ = false;
};

/// A plain-text account of a failed job for people: the first failed rank,
/// how it ended, its log file and the last `tail_lines` lines of that log,
/// then one line per other rank ("rank 3 (pid 123): stopped by the launcher
/// (SIGTERM)"), or one line per outcome shared by more than 4 ranks ("31
/// ranks (0, 2-31): stopped by the launcher (SIGTERM)"). Empty when
/// `result.success()`.
std::string failure_report(const JobResult& result, std::size_t tail_lines = 20);

}  // namespace davincirun
