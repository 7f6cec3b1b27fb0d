// Running a plan: the handle of a job whose ranks run under their own
// davincirun-supervisor process.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "davincirun/console_sink.hpp"
#include "davincirun/enum_names.hpp"
#include "davincirun/plan.hpp"
#include "davincirun/supervisor.hpp"

namespace davincirun {

/// Where a Job's live console output goes when it is not a LineSink.
enum class ConsoleTarget {
  stdio,  ///< this process's stdout (the ranks' lines) and stderr (notices), written by the supervisor process
  none,   ///< nowhere: the log files only
};

/// to_string(): "stdio" or "none".
DAVINCIRUN_ENUM_NAMES(ConsoleTarget, "stdio", "none");

/// The name of a rank's log file in the run directory:
/// "rank_<rank>.device_<physical device id>.log"; "scheduler.log" for
/// MindSpore's scheduler (the name msrun gives its log too). A job that
/// restarts keeps every attempt's logs: attempt 2 and later add
/// ".attempt<N>" before ".log" ("rank_3.device_3.attempt2.log").
std::string rank_log_file_name(const RankAssignment& rank, int attempt = 1);

/// The job's supervisor process, started before there is a plan so that its
/// own start (loading the program and becoming a subreaper: about 1 ms) runs
/// on another core while the plan is made; the `davincirun` command starts
/// a forked one (forked()) the same way. Give it to the Job made from the
/// plan. Dropped unused (the plan failed),
/// it ends at once, since its lifeline closes before any job came, and is
/// reaped. `program`: LaunchOptions::supervisor_program (empty: looked up as
/// a Job looks it up). Throws ConfigError when it cannot be found or started.
class SupervisorProcess {
 public:
  explicit SupervisorProcess(const std::string& program);
  /// A supervisor process that is a forked copy of this one, running
  /// `host_main` (the supervisor program's own main, which a program
  /// linking it passes: `davincirun::detail::run_job_host`) with its end of
  /// the lifeline as descriptor 3, its name `davincirun-supe` as the
  /// program's (see ChildProcess::fork_call()). Nothing is loaded, so it is
  /// ready at once: the `davincirun` command saves 0.35 ms per job this
  /// way on a 2-core VM (bench/README.md, "The launch floor"). Only from a process with a
  /// single thread (a Python process has several: it starts the program).
  /// Throws ConfigError when fork() fails, std::logic_error when this
  /// process has another thread.
  static SupervisorProcess forked(int (*host_main)(int lifeline_fd));
  SupervisorProcess(SupervisorProcess&&) noexcept;
  SupervisorProcess& operator=(SupervisorProcess&&) noexcept;
  ~SupervisorProcess();

 private:
  friend class Job;
  struct Parts;
  explicit SupervisorProcess(std::unique_ptr<Parts> parts) noexcept;
  std::unique_ptr<Parts> parts_;
};

/// A running job.
///
/// Process model: the Job starts one davincirun-supervisor process per job,
/// in a session of its own, holding one end of a socket pair (the
/// lifeline). That process is the parent of every rank and a child
/// subreaper (where the kernel allows it: JobResult::child_subreaper),
/// creates the run directory and writes the logs. When this
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
  /// file per rank (rank_log_file_name(), mode 0600), and starts every
  /// rank. Console lines, notices, progress lines and rank exits are
  /// relayed to `console` (every LineSink call; made from the threads that
  /// construct the Job and call wait()), which must outlive the Job. Throws
  /// DeviceBusyError, ConfigError (log dir or lock dir unusable, no
  /// supervisor executable), SpawnError, SystemError; nothing is left
  /// running when it throws.
  Job(const LaunchPlan& plan, LineSink& console);
  /// The same, with the console written by the supervisor process itself.
  Job(const LaunchPlan& plan, ConsoleTarget console);
  /// The same, on a supervisor process started before the plan was made.
  Job(const LaunchPlan& plan, ConsoleTarget console, SupervisorProcess supervisor);
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
  /// bytes. Call once (a second call throws std::logic_error). Throws
  /// SystemError or Error if the supervisor process died without a result:
  /// its ranks die with it (PR_SET_PDEATHSIG), and this call then SIGKILLs
  /// every process of this user still carrying the job's
  /// DAVINCIRUN_JOB_TAG (what the ranks started) before it throws.
  JobResult wait();
  /// Stops the job; see Supervisor::request_stop(). Thread- and signal-safe.
  void request_stop() noexcept;
  /// Stops the job because this process got `signal` (SIGTERM, SIGHUP...)
  /// from process `sender` (0: not known; siginfo's si_pid): see
  /// Supervisor::request_stop_by_signal(), which never escalates, so a
  /// signal the engine sends to every process of the job is one stop. The
  /// result names this process as the one that got it
  /// (SignalReceiver::launcher). Thread- and signal-safe.
  void request_stop_by_signal(int signal, pid_t sender = 0) noexcept;
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
  void start(const LaunchPlan& plan, ConsoleTarget target, SupervisorProcess supervisor);
  void send_command(const char* bytes, std::size_t size) noexcept;

  LineSink* console_ = nullptr;  // set: relayed to it (the target is then ignored)
  std::unique_ptr<Connection> connection_;
  int lifeline_fd_ = -1;  // a copy of the connection's, for signal handlers
  std::string run_dir_;
  std::vector<pid_t> pids_;
  std::string tag_;  // DAVINCIRUN_JOB_TAG of the ranks
  ProcessTracking tracking_ = ProcessTracking::pidfd;
  bool waited_ = false;
};

}  // namespace davincirun
