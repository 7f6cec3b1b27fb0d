// Process supervisor: starts one process per rank and runs the event loop
// that relays their output and reacts to their exits, fail-fast.
//
// Exits are observed in one epoll set together with the output pipes, either
// through one pidfd per rank (Linux >= 5.4; no SIGCHLD handling at all, so
// the supervisor can live inside any host process without reaping children
// it did not start) or, in a process that owns all its children, through
// SIGCHLD read from a signalfd (any kernel, 4.19 included).
//
// Fail-fast: when a rank exits non-zero or by a signal, every other rank's
// process group gets SIGTERM at once, and SIGKILL once `grace_period` has
// passed. Every stop is told on the console: how many ranks get SIGTERM and
// when SIGKILL follows, then (after 3 s) which ranks still run. Processes a rank leaves behind in its own process group
// are SIGKILLed when the rank exits.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "davincirun/device_allocation.hpp"
#include "davincirun/log_streamer.hpp"
#include "davincirun/process.hpp"
#include "davincirun/unique_fd.hpp"

namespace davincirun {

/// Default time between SIGTERM and SIGKILL when stopping ranks: 10 s. Long
/// enough for a framework to write a checkpoint marker and release the NPU,
/// short enough that a notebook user is not left waiting.
inline constexpr std::chrono::milliseconds default_grace_period{10'000};

/// Longest accepted grace period: 24 h.
inline constexpr std::chrono::milliseconds max_grace_period{86'400'000};

/// Default time a rank's output pipe may stay open after the rank exited
/// (held by a descendant that left its process group): 2 s.
inline constexpr std::chrono::milliseconds default_drain_timeout{2'000};

/// How the supervisor learns that a rank exited.
enum class ProcessTracking {
  /// pidfd where the kernel has it (pidfd_supported()), else sigchld. With
  /// SupervisorOptions::owns_all_children, also sigchld when clone() refuses
  /// CLONE_PIDFD for the first rank (a seccomp filter, qemu-user):
  /// JobResult::tracking_fallback says why.
  automatic,
  pidfd,    ///< one pidfd per rank in the event loop (Linux >= 5.4)
  sigchld,  ///< SIGCHLD through a signalfd, then waitid(): any kernel; needs owns_all_children
};

/// "automatic", "pidfd" or "sigchld".
const char* to_string(ProcessTracking tracking) noexcept;

struct SupervisorOptions {
  std::chrono::milliseconds grace_period = default_grace_period;
  std::chrono::milliseconds drain_timeout = default_drain_timeout;
  /// Longest the whole job may run before every rank is stopped, counted from
  /// the start of run(); zero (the default) means no limit.
  std::chrono::milliseconds job_timeout{0};
  ProcessTracking tracking = ProcessTracking::automatic;
  /// What the user does to ask for a stop, in the front end's words: the
  /// notice that starts a stop says SIGKILL follows "at once on a second
  /// Ctrl-C" (the CLI's "Ctrl-C"). Default "stop request" (request_stop()).
  std::string stop_request_name = "stop request";
  /// Set only in a process dedicated to one job (the job supervisor process,
  /// davincirun-supervisor), which has SIGCHLD blocked in every thread and
  /// normally is a child subreaper (PR_SET_CHILD_SUBREAPER). The supervisor
  /// then reaps every child of the process, including descendants re-parented
  /// to it, and once every rank has exited it SIGKILLs whatever the ranks
  /// left running anywhere below this process (a double-forked, setsid()
  /// grandchild included) before draining the last output. Default false:
  /// the supervisor touches only the processes it started.
  bool owns_all_children = false;
  /// With owns_all_children: an environment entry ("NAME=value", e.g.
  /// "DAVINCIRUN_JOB_TAG=<random>") that every process of the job inherits.
  /// Used only when this process is not a child subreaper (the kernel
  /// refused PR_SET_CHILD_SUBREAPER: a seccomp filter, qemu-user): a process
  /// a rank detached (double fork) is then re-parented to init, out of reach
  /// of the sweep by ancestry, so the sweep also SIGKILLs every process of
  /// this user whose environment holds this entry. Empty (the default): no
  /// such sweep. Not sent over the lifeline: davincirun-supervisor sets it.
  std::string job_tag = {};
};

/// One rank (or a scheduler: ProcessRole) to start.
struct RankLaunch {
  ProcessRole role = ProcessRole::rank;
  int rank = 0;  ///< -1 for a scheduler
  ProcessSpec process;
  std::string log_path;         ///< created by the supervisor; must not exist yet
  std::string label;            ///< console prefix, e.g. "rank 3"
  bool show_on_console = true;  ///< false: its output goes to its log file only
};

/// How one rank (or the scheduler: `role`) ended.
struct RankResult {
  ProcessRole role = ProcessRole::rank;
  int rank = 0;  ///< -1 for a scheduler
  pid_t pid = 0;
  std::string log_path;
  ExitStatus status;
  bool terminated_by_launcher = false;  ///< got SIGTERM from the launcher before it exited
  bool killed_by_launcher = false;      ///< got SIGKILL after the grace period
  std::chrono::system_clock::time_point started;
  std::chrono::system_clock::time_point ended;
  std::uint64_t output_bytes = 0;        ///< bytes the rank wrote (stdout + stderr)
  std::optional<std::string> log_error;  ///< the log file could not take every byte
};

/// `t` as seconds since the epoch (RankResult::started, ::ended in summaries).
double seconds_since_epoch(std::chrono::system_clock::time_point t) noexcept;

enum class StopReason {
  none,         ///< every rank ended on its own
  rank_failed,  ///< fail-fast after the first failure
  requested,    ///< request_stop() (Ctrl-C, terminate())
  timed_out,    ///< the job ran longer than SupervisorOptions::job_timeout
  signaled,     ///< request_stop_by_signal(): a signal to the process running the supervisor
  /// request_stop_orphaned(): whoever started the job is gone (the launcher
  /// exited or was killed; its end of the lifeline closed).
  launcher_gone,
  /// request_stop_by_peer(): a rank on another server of the job failed, or
  /// that server's job was stopped (JobResult::peer_stop says which).
  peer_failed,
  /// request_stop_by_peer(): the agent of another server, its host or the
  /// link to it was lost (no heartbeat for the peer timeout, or its
  /// connection closed before it was done).
  peer_lost,
  /// request_stop_by_peer(): no rank of the job wrote output for the stall timeout.
  stalled,
};

/// "none", "rank_failed", "requested", "timed_out", "signaled",
/// "launcher_gone", "peer_failed", "peer_lost" or "stalled".
const char* to_string(StopReason reason) noexcept;

/// What stopped a job from another server, as the peer channel told it
/// (docs/multi-server.md).
struct PeerStop {
  std::string server_id;  ///< where it happened (for stalled: the server of rank 0, which decided)
  /// StopReason::peer_failed by a failed rank: its role, rank and exit status.
  std::optional<ExitStatus> status;
  ProcessRole role = ProcessRole::rank;
  int rank = -1;
  /// The failed rank's root cause from its log (root_cause.hpp), or why, in
  /// words ("stop requested", "no heartbeat from ... for 30.0 s").
  std::string detail;
};

/// One line on what stopped the job from another server: "rank 5 on server
/// 10.0.0.12 failed with exit code 1", "lost server 10.0.0.12: ...", "the
/// job stalled: ..." (`reason`: peer_failed, peer_lost or stalled).
std::string describe(StopReason reason, const PeerStop& stop);

struct JobResult {
  std::vector<RankResult> ranks;             ///< in the order given to the supervisor
  std::optional<std::size_t> first_failure;  ///< index in `ranks` of the earliest failure seen
  StopReason stop_reason = StopReason::none;
  /// The signal behind StopReason::signaled (e.g. 15), else 0.
  int stop_signal = 0;
  /// Processes the ranks left running outside their process groups (e.g. a
  /// double-forked, setsid() daemon) that were SIGKILLed when the job ended;
  /// counted only with SupervisorOptions::owns_all_children.
  std::size_t leftover_processes_killed = 0;
  /// How the ranks' exits were observed.
  ProcessTracking tracking = ProcessTracking::pidfd;
  /// Why `automatic` tracking uses sigchld on a kernel with pidfds: clone()
  /// refused CLONE_PIDFD, e.g. "clone() refused CLONE_PIDFD: EINVAL (Invalid
  /// argument)". Empty when no fallback happened.
  std::optional<std::string> tracking_fallback;
  /// With SupervisorOptions::owns_all_children: whether this process was a
  /// child subreaper (PR_GET_CHILD_SUBREAPER), so that the final sweep found
  /// detached descendants by ancestry; false means only
  /// SupervisorOptions::job_tag could find them. Always true without
  /// owns_all_children, where no sweep happens.
  bool child_subreaper = true;
  /// StopReason::peer_failed, peer_lost or stalled: what the peer channel said.
  std::optional<PeerStop> peer_stop;
  /// Set by a Job (job.hpp) when <run dir>/summary.json could not be
  /// written, e.g. "No space left on device"; the job's outcome is unaffected.
  std::optional<std::string> summary_error;

  /// Every rank exited 0 and nobody asked to stop.
  bool success() const noexcept;
  /// 0 on success; the first failure's shell code (N, or 128+signal);
  /// 130 (128+SIGINT) when stopped on request without a failure; 128+N
  /// when signal N stopped it (StopReason::signaled); 124 (as timeout(1)
  /// reports it) when the job timeout stopped it; 129 (128+SIGHUP, as for a
  /// hangup) when the launcher went away (StopReason::launcher_gone); for
  /// peer_failed the failed rank's code on the other server (1 when no rank
  /// failed there: it was stopped), for peer_lost 1, for stalled 124.
  int exit_code() const noexcept;
};

class Supervisor {
 public:
  /// Starts every rank. When one cannot be started, those already started
  /// are killed and reaped, and SpawnError (or SystemError) is thrown.
  Supervisor(std::vector<RankLaunch> ranks, SupervisorOptions options, LineSink& console);
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;
  /// Kills (SIGKILL) and reaps whatever is still running.
  ~Supervisor();

  /// Runs the event loop until every rank has exited and its output is
  /// drained. Call once, from one thread. Throws SystemError if epoll fails.
  JobResult run();

  /// Asks run() to stop the job: SIGTERM now, SIGKILL after the grace period;
  /// a call while a stop is under way (for any reason) SIGKILLs at once: a
  /// person's second Ctrl-C. Safe from any thread and from a signal
  /// handler (it only writes to an eventfd).
  void request_stop() noexcept;

  /// request_stop() because whoever started the job is gone (the
  /// launcher's end of the lifeline closed): nobody is left to ask for a
  /// SIGKILL, and the notice says so. Same safety as request_stop().
  void request_stop_orphaned() noexcept;

  /// Asks run() to SIGKILL every rank at once. Same safety as request_stop().
  void request_kill() noexcept;
  /// request_kill() because whoever started the job dropped it before it
  /// ended (its handle was destroyed): the notice says so. Same safety.
  void request_kill_dropped() noexcept;

  /// request_stop() because the process running the supervisor got `signal`
  /// (e.g. SIGTERM from a platform stopping the job): the result says so
  /// (StopReason::signaled, exit code 128 + `signal`). Same safety. Unlike
  /// request_stop(), it never escalates to SIGKILL: an engine such as
  /// Slurm signals every process of a step at once, the launcher and this
  /// process alike, and that is one stop whose grace period holds.
  void request_stop_by_signal(int signal) noexcept;

  /// Stops the job because of another server (the peer channel): `reason`
  /// is peer_failed, peer_lost or stalled, `stop` says where and why. Like
  /// a signal's stop, never a reason to kill before the grace period is
  /// over. Safe from any thread; not from a signal handler.
  void request_stop_by_peer(StopReason reason, PeerStop stop);

  /// Called on run()'s thread when this job begins to stop for a reason of
  /// its own (not request_stop_by_peer()): a failed rank (`failure` points
  /// to it), a stop request, a signal, the job timeout, the launcher gone.
  /// Must not block: the peer channel's agent only queues it.
  using StopListener = std::function<void(StopReason reason, const RankResult* failure, const std::string& why)>;
  /// Sets the StopListener; call before run().
  void set_stop_listener(StopListener listener) { stop_listener_ = std::move(listener); }

  /// Writes `text` as a notice line from run()'s thread, in order with the
  /// ranks' lines: for other threads of the process (the peer channel).
  /// Safe from any thread; not from a signal handler.
  void post_notice(std::string text);
  /// Writes the notices post_notice() left after run() returned; call on
  /// the thread that called run().
  void flush_posted_notices();

  /// Milliseconds since a rank (or the scheduler) last wrote output, or
  /// since run() began when none has: the stall watchdog's measure. Safe
  /// from any thread.
  std::uint64_t silent_ms() const noexcept;

  /// Asks run() to send `signal` (1..31, e.g. SIGUSR1) to every running
  /// rank's process group. Same safety as request_stop().
  void forward_signal(int signal) noexcept;

  /// Process ids of the ranks, in order.
  std::vector<pid_t> pids() const;

  /// The tracking in use (never `automatic`).
  ProcessTracking tracking() const noexcept { return tracking_; }

 private:
  struct Rank;
  void watch(int fd, std::uint64_t data);
  void unwatch(int fd);
  void handle_exit(std::size_t index);
  void reap_children();
  void sweep_descendants();
  /// Bytes moved from the rank's pipe.
  std::uint64_t handle_output(std::size_t index);
  /// requested, or launcher_gone once request_stop_orphaned() was called.
  StopReason requested_reason() const noexcept {
    return orphaned_.load() ? StopReason::launcher_gone : StopReason::requested;
  }
  void begin_stop(StopReason reason, std::optional<std::size_t> except, const std::string& why);
  void stop_ranks(StopReason reason, std::optional<std::size_t> except, const std::string& why);
  void handle_stop_requests();
  /// How the first stop request came: the first one names the stop.
  enum class StopCause : int { none, request, signal, orphaned, peer };
  void note_cause(StopCause cause) noexcept;
  void wake_for_stop() noexcept;
  void report_still_running();
  void kill_remaining();
  void close_output(std::size_t index);
  int next_timeout_ms() const;
  void check_deadlines();
  void log_notice(const std::string& text);

  SupervisorOptions options_;
  LineSink* console_;
  UniqueFd epoll_fd_;
  UniqueFd control_fd_;                                 // epoll of everything but output: the coalescing wait's
  UniqueFd stop_fd_;                                    // eventfd written by request_stop() and request_kill()
  UniqueFd signal_fd_;                                  // eventfd written by forward_signal()
  UniqueFd child_fd_;                                   // signalfd for SIGCHLD (owns_all_children only)
  std::vector<Rank> ranks_;                             // after the descriptors: destroyed (killed and reaped) first
  std::unordered_map<pid_t, std::size_t> rank_by_pid_;  // for reaping by SIGCHLD
  std::size_t live_ranks_ = 0;                          // ranks not yet exited
  std::size_t open_logs_ = 0;                           // ranks whose output is still read
  std::size_t draining_ = 0;                            // exited ranks whose output is still read
  ProcessTracking tracking_ = ProcessTracking::pidfd;
  std::optional<std::string> tracking_fallback_;
  bool child_subreaper_ = true;
  bool swept_ = false;
  std::size_t leftovers_killed_ = 0;
  std::atomic<std::uint32_t> signals_to_forward_{0};  // bit N: signal N
  std::atomic<int> stop_signal_{0};                   // set by request_stop_by_signal()
  std::atomic<bool> dropped_{false};                  // set by request_kill_dropped()
  std::atomic<bool> orphaned_{false};                 // set by request_stop_orphaned()
  std::atomic<int> first_cause_{0};                   // StopCause of the first request
  std::atomic<std::uint64_t> requests_{0};            // request_stop() calls (a person's)
  std::atomic<bool> kill_requested_{false};
  std::uint64_t requests_seen_ = 0;
  std::mutex peer_mutex_;  // guards the two below
  StopReason peer_reason_ = StopReason::none;
  std::optional<PeerStop> peer_stop_;
  std::vector<std::string> posted_notices_;  // guarded by peer_mutex_
  StopListener stop_listener_;
  std::chrono::steady_clock::time_point run_started_;
  std::atomic<std::int64_t> last_output_ns_{0};  // steady clock, 0: none yet
  void forward_pending_signals();
  StreamScratch scratch_;
  NullLineSink hidden_;  // the console of ranks not shown live
  StopReason stop_reason_ = StopReason::none;
  std::optional<std::size_t> first_failure_;
  std::optional<std::chrono::steady_clock::time_point> kill_deadline_;
  std::optional<std::chrono::steady_clock::time_point> report_deadline_;  // to name the ranks outliving SIGTERM
  std::optional<std::chrono::steady_clock::time_point> job_deadline_;
  bool killed_all_ = false;
};

}  // namespace davincirun
