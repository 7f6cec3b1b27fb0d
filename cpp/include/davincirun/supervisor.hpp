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
//
// A job that restarts (SupervisorOptions::max_restarts, set_restarts()) goes
// on from `waiting_for_servers` to `restarting` instead of `done` when its
// judge says so, then starts every rank again (docs/restarts.md).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "davincirun/job_types.hpp"
#include "davincirun/lifecycle.hpp"
#include "davincirun/log_streamer.hpp"
#include "davincirun/process.hpp"
#include "davincirun/supervisor_options.hpp"
#include "davincirun/unique_fd.hpp"

namespace davincirun {

/// One rank (or a scheduler: ProcessRole) to start.
struct RankLaunch {
  ProcessRole role = ProcessRole::rank;
  int rank = 0;  ///< -1 for a scheduler
  ProcessSpec process;
  std::string log_path;         ///< created by the supervisor; must not exist yet
  std::string label;            ///< console prefix, e.g. "rank 3"
  bool show_on_console = true;  ///< false: its output goes to its log file only
};

/// One line on what stopped the job from another server: "rank 5 on server
/// 10.0.0.12 failed with exit code 1", "server 10.0.0.12 was stopped (stop
/// requested)", "server 10.0.0.12 was lost 4.2 s after the agents met: ...", "the job stalled: ..."
/// (`reason`: peer_failed, peer_stopped, peer_lost or stalled).
std::string describe(StopReason reason, const PeerStop& stop);

namespace detail {
class RequestInbox;
class HelperThread;
struct RankSet;
}  // namespace detail

/// What the judge of a job that restarts says of an attempt that is over.
struct AttemptVerdict {
  bool restart = false;
  std::string root_cause;  ///< JobAttempt::root_cause
  std::string decision;    ///< JobAttempt::decision: why it restarts, or why not
};

/// What a job spanning servers tells its peer channel, and asks of it
/// (set by the supervisor process; a job of one server needs none).
struct ServerLink {
  /// This job begins to stop for a reason of its own (a failed rank:
  /// `failure` points to it; a stop request, a signal, the job timeout, the
  /// launcher gone), or stops waiting for the other servers: tell them.
  /// Called on run()'s thread; must not block (the agent only queues it).
  std::function<void(StopReason reason, const RankResult* failure, const std::string& why)> local_stop;
  /// Every process of this server is done (`success`: each exited 0 and
  /// nothing stopped the job; `verdict`: this server's judge's word on the
  /// attempt in a job that restarts, else null; `so_far`: the job's result
  /// as it stands, its attempts to this one): the job now waits for the
  /// other servers until servers_done(), servers_decided() or a stop.
  /// Called on run()'s thread; must not wait on anything (it may read this
  /// server's files: the record's part is made here).
  std::function<void(bool success, const AttemptVerdict* verdict, const JobResult& so_far)> local_done;
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

/// The job's word on an attempt that is over, from the server of rank 0 (a
/// job of several servers that restarts): every server restarts, or the job
/// ends. The same on every server.
struct ServersDecision {
  bool restart = false;
  std::string decision;    ///< JobAttempt::decision
  std::string root_cause;  ///< the first failure's, from its server ("" when none)
  /// What stopped the attempt on another server after every process here
  /// had exited 0: this server's record of the attempt names it.
  std::optional<std::pair<JobEvent, PeerStop>> stop;
};

/// How a job restarts (set by the supervisor process; without it, a job never does).
struct Restarts {
  /// Called on run()'s thread once every process of an attempt is gone and
  /// its output drained, with the attempt's result (JobResult::attempts:
  /// the earlier attempts, then this one, its decision empty) and, when
  /// an event during the attempt rules a restart out (restarts_after()),
  /// that event's words, else "". May read log files; must not block long.
  std::function<AttemptVerdict(const JobResult& attempt, const std::string& ruled_out_by)> judge;
  /// The processes of attempt `attempt` (2, 3, ...), as the constructor was
  /// given those of the first: same order, new log files.
  std::function<std::vector<RankLaunch>(int attempt)> launches;
};

class Supervisor {
 public:
  /// Starts every rank (the job's `starting` state). When one cannot be
  /// started, those already started are killed and reaped, and SpawnError
  /// (or SystemError) is thrown. `first_attempt`: the attempt these ranks
  /// are (a server that rejoins a job of several servers starts at the
  /// job's attempt; JobResult::attempts then begins there).
  Supervisor(std::vector<RankLaunch> ranks, SupervisorOptions options, LineSink& console, int first_attempt = 1);
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
  /// The hub decided on the attempt this server waits after
  /// (ServerLink::local_done): with `restart`, the job restarts
  /// (JobEvent::restart_ordered), else it ends at servers_done(). Safe from
  /// any thread; not from a signal handler.
  void servers_decided(ServersDecision decision);

  /// Sets the ServerLink; call before run().
  void set_server_link(ServerLink link);
  /// Calls `on_readable` on run()'s thread whenever `fd` is readable (data,
  /// its end, an error), after the ranks' output of the same wake-up; it
  /// must not block. Returning false stops the watch (`fd` was read to its
  /// end). For what the job's own process reads beside the ranks, without
  /// a thread: the launcher's commands, the process's own stop signals.
  /// Call before run(); `fd` and what `on_readable` uses must outlive run().
  void watch_readable(int fd, std::function<bool()> on_readable);
  /// Lets the job restart (SupervisorOptions::max_restarts > 0); call before run().
  void set_restarts(Restarts restarts);

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

  /// The attempt running (1, then 2 after the first restart...). Call on run()'s thread.
  int attempt() const noexcept { return attempt_; }

  /// The state the job is in (lifecycle.hpp). Safe from any thread.
  JobState state() const noexcept { return state_.load(std::memory_order_relaxed); }

  /// Called on run()'s thread with one line for every state the job enters
  /// ("running -> stopping on rank_failed"), every event that changed
  /// nothing ("stop_request in killing: ignored (...)") and every notice,
  /// quiet ones included: the job's journal (<run>/events.txt). Set before run().
  using Journal = std::function<void(const std::string& line)>;
  void set_journal(Journal journal) { journal_ = std::move(journal); }
  /// Called on run()'s thread every `period` while ranks run (running,
  /// stopping, killing), e.g. to look at their progress. Set before run().
  void set_ticker(std::function<void()> tick, std::chrono::milliseconds period) {
    ticker_ = std::move(tick);
    tick_period_ = period;
  }

 private:
  struct Event;
  struct Clocks;
  // The loop (supervisor.cpp).
  void spawn(std::vector<RankLaunch> launches);
  void watch(int fd, std::uint64_t data);
  void unwatch(int fd);
  /// What the last round of the loop read: all ranks' bytes, and the most from one pipe.
  struct OutputRound {
    std::uint64_t bytes = 0;
    std::uint64_t largest = 0;
  };
  void wait_and_dispatch(OutputRound& round);
  void relay_output(OutputRound& round);
  void note_output();  // last_output_ns_: output came now
  std::uint64_t handle_output(std::size_t index);
  void handle_exit(std::size_t index);
  void reap_children();
  void close_output(std::size_t index);
  void forward_pending_signals();
  JobResult result() const;
  // The life cycle (supervisor_states.cpp; restarts: supervisor_restarts.cpp).
  void on(const Event& event);
  void enter(JobState state, const Event& cause);
  void begin_stop(const Event& event);
  std::string describe_event(const Event& event) const;
  std::string asker() const;
  void enter_stopping(const Event& cause);
  /// The grace period of the stop under way (kill_on_failure: none after a failure).
  std::chrono::milliseconds stop_grace() const;
  void enter_killing(const Event& cause);
  void enter_draining();
  void enter_waiting();
  void enter_restarting();
  void enter_starting();
  void say_restart_called_off(const Event& cause);
  void apply_decision(ServersDecision decision);
  JobAttempt current_attempt() const;
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
  bool may_fall_back_ = false;  // the first rank may fall back to SIGCHLD tracking
  std::size_t leftovers_killed_ = 0;
  ServerLink link_;
  Restarts restarts_;
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
  // The attempts: those over (restarted), and the current one's number,
  // start, verdict and what ruled its restart out.
  std::vector<JobAttempt> attempts_;
  int attempt_ = 1;
  std::chrono::system_clock::time_point attempt_started_ = std::chrono::system_clock::now();
  std::optional<AttemptVerdict> verdict_;
  std::string ruled_out_;
  bool restart_called_off_ = false;
  std::vector<Event> deferred_;  // events a short state keeps for the next
  std::chrono::steady_clock::time_point run_started_;
  std::atomic<std::int64_t> last_output_ns_{0};  // steady clock, 0: none yet
  StreamScratch scratch_;
  // The ranks whose pipes one round found readable, those of them whose
  // output goes by splice(2), what each moved, and the thread that moves
  // some of them (made when first needed).
  std::vector<std::size_t> ready_;
  std::vector<std::size_t> spliced_;
  std::vector<RankLog::Spliced> moves_;
  std::unique_ptr<detail::HelperThread> helper_;
  NullLineSink hidden_;  // the console of ranks not shown live
  std::function<void()> ticker_;
  std::chrono::milliseconds tick_period_{1000};
  std::vector<std::pair<int, std::function<bool()>>> readable_;  // watch_readable(); null once unwatched
};

}  // namespace davincirun
