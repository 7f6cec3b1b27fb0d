// Process supervisor: starts one process per rank and runs the event loop
// that relays their output and reacts to their exits, fail-fast.
//
// Exits are observed in one epoll set together with the output pipes, either
// through one pidfd per rank (Linux >= 5.4; no SIGCHLD handling at all, so
// the supervisor can live inside any host process without reaping children
// it did not start) or, in a process that owns all its children, through
// SIGCHLD read from a signalfd (any kernel, 4.19 included).
//
// What an event does is decided by the job's life cycle (lifecycle.hpp): the
// loop looks every event up in the state the job is in, and entering a state
// does its work. Fail-fast: when a rank exits non-zero or by a signal, every
// other rank's process group gets SIGTERM at once (entering `stopping`), and
// SIGKILL once `grace_period` has passed (entering `killing`). Every stop is
// told on the console: how many ranks get SIGTERM and when SIGKILL follows,
// then (after 3 s) which ranks still run. Processes a rank leaves behind in
// its own process group are SIGKILLed when the rank exits.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "davincirun/device_allocation.hpp"
#include "davincirun/lifecycle.hpp"
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
  /// What the process that started the job is called in messages: "the
  /// signal came to <launcher_name>" ("davincirun" from the CLI). Default
  /// "the launcher".
  std::string launcher_name = "the launcher";
  /// The stall watchdog of a job of one server: stop the job (StopReason::
  /// stalled) when no rank wrote output for this long; zero (the default):
  /// none. A job of several servers leaves it to the peer channel, which
  /// hears every server's silence.
  std::chrono::milliseconds stall_timeout{0};
  /// Only messages that matter (stops, failures, warnings) reach the
  /// console; the rest (an agent joined, waiting for other servers) goes to
  /// <run>/events.txt only. Default false.
  bool quiet = false;
  /// For tests: the job stays this long in `hold_state` after entering it
  /// (the event that would end that state is kept until then), answering
  /// every other event as that state does; zero (the default): no hold.
  /// Set from DAVINCIRUN_TEST_HOLD ("draining:2000") by the supervisor
  /// program. Holds `starting`, `killing`, `draining` and
  /// `waiting_for_servers`.
  JobState hold_state = JobState::done;
  std::chrono::milliseconds hold{0};
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
  /// request_stop_by_peer(): a rank on another server of the job failed
  /// (JobResult::peer_stop says which).
  peer_failed,
  /// request_stop_by_peer(): the job was stopped on another server (a stop
  /// request, a signal, its timeout, its launcher gone).
  peer_stopped,
  /// request_stop_by_peer(): the agent of another server, its host or the
  /// link to it was lost (no heartbeat for the peer timeout, or its
  /// connection closed before it was done), or it never joined (hub), or
  /// the hub could not be reached (member): PeerStop::detail says which.
  peer_lost,
  /// No rank of the job wrote output for the stall timeout (this server's
  /// watchdog, or the hub's through request_stop_by_peer()).
  stalled,
};

/// "none", "rank_failed", "requested", "timed_out", "signaled",
/// "launcher_gone", "peer_failed", "peer_stopped", "peer_lost" or "stalled".
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
/// 10.0.0.12 failed with exit code 1", "server 10.0.0.12 was stopped (stop
/// requested)", "server 10.0.0.12 was lost: ...", "the job stalled: ..."
/// (`reason`: peer_failed, peer_stopped, peer_lost or stalled).
std::string describe(StopReason reason, const PeerStop& stop);

/// Which process of the job got a stop signal.
enum class SignalReceiver {
  none,        ///< no signal stopped the job
  launcher,    ///< the launcher (the `davincirun` command), which told its supervisor
  supervisor,  ///< the job's supervisor process itself (an engine or a person signalling it)
};

/// "none", "launcher" or "supervisor".
const char* to_string(SignalReceiver receiver) noexcept;

/// Where a stop signal came from, when known.
struct SignalOrigin {
  SignalReceiver receiver = SignalReceiver::supervisor;
  pid_t sender_pid = 0;     ///< 0: not known (the kernel, or not told)
  std::string sender_name;  ///< the sender's command name (/proc/<pid>/comm) when it could be read
};

struct JobResult {
  std::vector<RankResult> ranks;             ///< in the order given to the supervisor
  std::optional<std::size_t> first_failure;  ///< index in `ranks` of the earliest failure seen
  StopReason stop_reason = StopReason::none;
  /// The signal behind StopReason::signaled (e.g. 15), else 0.
  int stop_signal = 0;
  /// StopReason::signaled: who got it, and from whom.
  SignalOrigin stop_signal_origin;
  /// What stopped the job, in the words its stop notice began with ("stop
  /// requested", "davincirun got SIGTERM from pid 4242 (timeout)", "rank 3
  /// (pid 77) failed with exit code 1"); empty when nothing stopped it.
  std::string stop_detail;
  /// The state the job was in when its stop began (e.g. waiting_for_servers:
  /// this server's ranks were done and it waited for the others); `done`
  /// when nothing stopped it.
  JobState stopped_in = JobState::done;
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
  /// StopReason::peer_failed, peer_stopped, peer_lost or stalled (from the
  /// hub): what the peer channel said.
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
  /// peer_failed the failed rank's code on the other server, for
  /// peer_stopped and peer_lost 1, for stalled 124.
  int exit_code() const noexcept;
};

namespace detail {
class RequestInbox;
struct RankSet;
}  // namespace detail

/// What a job spanning servers tells its peer channel, and asks of it
/// (set by the supervisor process; a job of one server needs none).
struct ServerLink {
  /// This job begins to stop for a reason of its own (a failed rank:
  /// `failure` points to it; a stop request, a signal, the job timeout, the
  /// launcher gone), or stops waiting for the other servers: tell them.
  /// Called on run()'s thread; must not block (the agent only queues it).
  std::function<void(StopReason reason, const RankResult* failure, const std::string& why)> local_stop;
  /// Every process of this server is done (`success`: each exited 0 and
  /// nothing stopped the job): the job now waits for the other servers
  /// until servers_done() or a stop. Called on run()'s thread; must not block.
  std::function<void(bool success)> local_done;
  /// What the job waits for, in words, for the progress lines of
  /// `waiting_for_servers`: "the agent of rank 0's server at 10.0.0.1:29731
  /// (not reached: Connection refused)". Called on run()'s thread.
  std::function<std::string()> waiting_for;
  /// This server's stall watchdog (SupervisorOptions::stall_timeout) is
  /// about to stop the job, `why` says so: the ranks' stacks are worth
  /// writing down first. Returns a notice for the console (where they
  /// are). Called on run()'s thread; may block briefly.
  std::function<std::string(const std::string& why)> before_stall_stop;
};

class Supervisor {
 public:
  /// Starts every rank (the job's `starting` state). When one cannot be
  /// started, those already started are killed and reaped, and SpawnError
  /// (or SystemError) is thrown.
  Supervisor(std::vector<RankLaunch> ranks, SupervisorOptions options, LineSink& console);
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;
  /// Kills (SIGKILL) and reaps whatever is still running.
  ~Supervisor();

  /// Runs the job from `running` to `done`: every rank has exited, its
  /// output is drained, and a job with a ServerLink has heard from the other
  /// servers (or stopped waiting). Call once, from one thread. Throws
  /// SystemError if epoll fails.
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
  /// request_stop() because a process of the job got `signal` (e.g. SIGTERM
  /// from a platform stopping the job): the result says so
  /// (StopReason::signaled, exit code 128 + `signal`, and `origin`). Same
  /// safety. Unlike request_stop(), it never escalates to SIGKILL: an
  /// engine such as Slurm signals every process of a step at once, the
  /// launcher and this process alike, and that is one stop whose grace
  /// period holds.
  void request_stop_by_signal(int signal, const SignalOrigin& origin = {}) noexcept;
  /// Stops the job because of another server (the peer channel): `event` is
  /// one of JobEvent::peer_failed, peer_stopped, peer_lost,
  /// peer_never_joined, hub_unreachable or stall; `stop` says where and why.
  /// Like a signal's stop, never a reason to kill before the grace period is
  /// over. Safe from any thread; not from a signal handler.
  void request_stop_by_peer(JobEvent event, PeerStop stop);
  /// The other servers are done (JobEvent::servers_done): a job waiting for
  /// them is done. Safe from any thread.
  void servers_done() noexcept;

  /// Sets the ServerLink; call before run().
  void set_server_link(ServerLink link);

  /// Writes `text` as a notice line from run()'s thread, in order with the
  /// ranks' lines (and into events.txt when there is one): for other
  /// threads of the process (the peer channel). `info`: a message the
  /// console may leave out (SupervisorOptions::quiet). Safe from any
  /// thread; not from a signal handler.
  void post_notice(std::string text, bool info = false);

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

  /// The state the job is in (lifecycle.hpp). Safe from any thread.
  JobState state() const noexcept { return state_.load(std::memory_order_relaxed); }

  /// Called on run()'s thread with one line for every state the job enters
  /// ("running -> stopping on rank_failed"), every event that changed
  /// nothing ("stop_request in killing: ignored (...)") and every notice,
  /// quiet ones included: the job's journal (<run>/events.txt). Set before run().
  using Journal = std::function<void(const std::string& line)>;
  void set_journal(Journal journal) { journal_ = std::move(journal); }

 private:
  struct Event;
  struct Clocks;
  // The loop (supervisor.cpp).
  void watch(int fd, std::uint64_t data);
  void unwatch(int fd);
  void wait_and_dispatch(std::uint64_t& round_bytes);
  std::uint64_t handle_output(std::size_t index);
  void handle_exit(std::size_t index);
  void reap_children();
  void close_output(std::size_t index);
  void forward_pending_signals();
  JobResult result() const;
  // The life cycle (supervisor_states.cpp).
  void on(const Event& event);
  void enter(JobState state, const Event& cause);
  void begin_stop(const Event& event);
  std::string describe_event(const Event& event) const;
  std::string asker() const;
  void enter_stopping(const Event& cause);
  void enter_killing(const Event& cause);
  void enter_draining();
  void enter_waiting();
  void enter_done(JobState from, const Event& cause);
  void take_requests();
  void check_clocks();
  bool stall_due() const;
  void fire_derived_events();
  bool held() const;
  int next_timeout_ms() const;
  void report_still_running();
  void say_waiting();
  void log_notice(const std::string& text, bool info = false);
  void flush_posted_notices();

  SupervisorOptions options_;
  LineSink* console_;
  UniqueFd epoll_fd_;
  UniqueFd control_fd_;  // epoll of everything but output: the coalescing wait's
  UniqueFd child_fd_;    // signalfd for SIGCHLD (owns_all_children only)
  std::unique_ptr<detail::RequestInbox> inbox_;
  std::unique_ptr<detail::RankSet> ranks_;  // after the descriptors: destroyed (killed and reaped) first
  std::unique_ptr<Clocks> clocks_;
  ProcessTracking tracking_ = ProcessTracking::pidfd;
  std::optional<std::string> tracking_fallback_;
  bool child_subreaper_ = true;
  std::size_t leftovers_killed_ = 0;
  ServerLink link_;
  Journal journal_;
  std::atomic<JobState> state_{JobState::starting};
  // What the job's record says of its stop: the first event that named it.
  struct StopRecord {
    StopReason reason = StopReason::none;
    JobState in = JobState::done;
    std::string why;  // the stop's notice starts so
    std::optional<PeerStop> peer;
    int signal = 0;
    SignalOrigin origin;
    std::optional<std::size_t> first_failure;
  };
  StopRecord stop_;
  std::vector<Event> deferred_;  // events a short state keeps for the next
  std::chrono::steady_clock::time_point run_started_;
  std::atomic<std::int64_t> last_output_ns_{0};  // steady clock, 0: none yet
  StreamScratch scratch_;
  NullLineSink hidden_;  // the console of ranks not shown live
};

}  // namespace davincirun
