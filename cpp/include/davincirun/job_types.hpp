// The words every stage of a job shares: what a process of the job is
// (ProcessRole, RankAssignment), how a process ended (ExitStatus), and how
// a rank and the whole job ended (RankResult, JobResult, StopReason,
// PeerStop, SignalOrigin). Each struct's field list (fields.hpp) drives its
// encodings: the lifeline, the peer channel, summary.json and Python.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "davincirun/enum_names.hpp"
#include "davincirun/fields.hpp"
#include "davincirun/lifecycle.hpp"

namespace davincirun {

/// What a process of a job is.
enum class ProcessRole {
  rank,       ///< a training process: one per device (a MindSpore "worker" in dynamic-cluster mode)
  scheduler,  ///< MindSpore's dynamic-cluster scheduler (MS_ROLE=MS_SCHED): no device, no rank
};
/// to_string(): "rank" or "scheduler".
DAVINCIRUN_ENUM_NAMES(ProcessRole, "rank", "scheduler");

/// How messages name a process of a job: "rank 3", or "scheduler" for
/// ProcessRole::scheduler (and for any negative `rank`, which only the
/// scheduler has).
std::string process_name(ProcessRole role, int rank);

/// One process to start on this machine.
struct RankAssignment {
  /// A scheduler has rank, local_rank and both device ids -1 and no device_ip.
  ProcessRole role = ProcessRole::rank;
  int rank = 0;                ///< global rank (RANK_ID, RANK)
  int local_rank = 0;          ///< rank - rank_start of this server (LOCAL_RANK)
  int physical_device_id = 0;  ///< the table's device_id: N of /dev/davinciN on the host
  int logical_device_id = 0;   ///< DEVICE_ID / ASCEND_DEVICE_ID as the runtime numbers devices here
  std::optional<std::string> device_ip;
};

constexpr auto fields_of(const RankAssignment*) {
  using A = RankAssignment;
  return std::make_tuple(field("role", &A::role, "\"rank\", or \"scheduler\" (rank, local rank and device ids -1).")
                             .only(on_wire | in_python),
                         field("rank", &A::rank).only(on_wire | in_python), field("local_rank", &A::local_rank),
                         field("physical_device_id", &A::physical_device_id),
                         field("logical_device_id", &A::logical_device_id),
                         field("device_ip", &A::device_ip).only(on_wire | in_python));
}

/// How a process ended.
struct ExitStatus {
  /// `unknown`: the status was lost because the host process set SIGCHLD to
  /// SIG_IGN (the kernel then reaps children itself); counted as a failure.
  enum class Kind { exited, signaled, unknown };
  Kind kind = Kind::exited;
  int value = 0;  ///< exit code (0..255) for exited, signal number for signaled

  bool success() const noexcept { return kind == Kind::exited && value == 0; }
  /// The shell's convention: the exit code, or 128 + N for signal N; 255 for unknown.
  int shell_code() const noexcept { return kind == Kind::exited ? value : kind == Kind::signaled ? 128 + value : 255; }
  /// "exit code 3", "signal 11 (SIGSEGV)" or "unknown exit status".
  std::string describe() const;
};
/// to_string(): "exited", "signaled" or "unknown".
DAVINCIRUN_ENUM_NAMES(ExitStatus::Kind, "exited", "signaled", "unknown");

// summary.json and Python show it in words and numbers (exit_code, signal, status).
constexpr auto fields_of(const ExitStatus*) {
  return std::make_tuple(field("kind", &ExitStatus::kind).only(on_wire),
                         field("value", &ExitStatus::value).only(on_wire));
}

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

constexpr auto fields_of(const RankResult*) {
  using R = RankResult;
  return std::make_tuple(
      field("role", &R::role,
            "\"rank\", or \"scheduler\" for MindSpore's scheduler (launch_mode=\"dynamic-cluster\")."),
      field("rank", &R::rank, "Its rank id; -1 for the scheduler."), field("pid", &R::pid, "Its process id."),
      field("log_path", &R::log_path, "Its log file, every byte it wrote.").summary_as("log"),
      field("status", &R::status).only(on_wire | in_summary),
      field("terminated_by_launcher", &R::terminated_by_launcher, "It got SIGTERM from the launcher before it exited."),
      field("killed_by_launcher", &R::killed_by_launcher, "It got SIGKILL after the grace period."),
      field("started", &R::started, "Seconds since the epoch."), field("ended", &R::ended, "Seconds since the epoch."),
      field("output_bytes", &R::output_bytes, "Bytes it wrote (stdout and stderr)."),
      field("log_error", &R::log_error,
            "Why its log file could not take every byte, e.g. \"No space left on device at byte N\"; None."));
}

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
/// to_string(): the enumerator's name.
DAVINCIRUN_ENUM_NAMES(StopReason, "none", "rank_failed", "requested", "timed_out", "signaled", "launcher_gone",
                      "peer_failed", "peer_stopped", "peer_lost", "stalled");

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

// role, rank and status reach summary.json and Python only when a rank failed there.
constexpr auto fields_of(const PeerStop*) {
  using P = PeerStop;
  return std::make_tuple(
      field("server_id", &P::server_id, "Where it happened."), field("status", &P::status).only(on_wire),
      field("role", &P::role).only(on_wire), field("rank", &P::rank).only(on_wire),
      field("detail", &P::detail, "The failed rank's root cause from its log there, or why the job stopped, in words.")
          .as(FieldText::any));
}

/// Which process of the job got a stop signal.
enum class SignalReceiver {
  none,        ///< no signal stopped the job
  launcher,    ///< the launcher (the `davincirun` command), which told its supervisor
  supervisor,  ///< the job's supervisor process itself (an engine or a person signalling it)
};
/// to_string(): "none", "launcher" or "supervisor".
DAVINCIRUN_ENUM_NAMES(SignalReceiver, "none", "launcher", "supervisor");

/// Where a stop signal came from, when known.
struct SignalOrigin {
  SignalReceiver receiver = SignalReceiver::supervisor;
  pid_t sender_pid = 0;     ///< 0: not known (the kernel, or not told)
  std::string sender_name;  ///< the sender's command name (/proc/<pid>/comm) when it could be read
};

// summary.json and Python name it in their own words (stop_signal_receiver, ...).
constexpr auto fields_of(const SignalOrigin*) {
  using O = SignalOrigin;
  return std::make_tuple(field("receiver", &O::receiver).only(on_wire),
                         field("sender_pid", &O::sender_pid).only(on_wire),
                         field("sender_name", &O::sender_name).only(on_wire));
}

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
/// to_string(): "automatic", "pidfd" or "sigchld".
DAVINCIRUN_ENUM_NAMES(ProcessTracking, "automatic", "pidfd", "sigchld");

/// One attempt of a job: its first run, or a restart of the whole job in
/// place (SupervisorOptions::max_restarts; docs/restarts.md).
struct JobAttempt {
  int attempt = 1;  ///< 1 for the first run, k + 1 after the k-th restart (DAVINCIRUN_RESTART_COUNT + 1)
  std::chrono::system_clock::time_point started;  ///< its first rank started
  std::chrono::system_clock::time_point ended;    ///< its last rank's output was drained
  StopReason stop_reason = StopReason::none;      ///< as JobResult::stop_reason, for this attempt
  std::string stop_detail;                        ///< as JobResult::stop_detail, for this attempt
  /// The first process that failed, as JobResult::ranks holds it (its log
  /// is this attempt's); none when no process failed.
  std::optional<RankResult> first_failure;
  /// Every process of this attempt, as JobResult::ranks holds the last
  /// attempt's (not in summary.json, which lists the first failure).
  std::vector<RankResult> ranks;
  /// The first failure's root cause in one line, from its torch error file
  /// or its log (root_cause.hpp): its exception ("ValueError: bad input"),
  /// else its CANN error code line; "" when neither was found.
  std::string root_cause;
  bool restarted = false;  ///< the job was started again after it
  /// Why the job was restarted after it, or why not ("no restarts left
  /// (max_restarts 3)", "it failed as attempt 1 did: ..."); "" for a job
  /// that ran once and was never to restart.
  std::string decision;
};

constexpr auto fields_of(const JobAttempt*) {
  using A = JobAttempt;
  return std::make_tuple(
      field("attempt", &A::attempt, "1 for the first run, k + 1 after the k-th restart."),
      field("started", &A::started, "Seconds since the epoch."), field("ended", &A::ended, "Seconds since the epoch."),
      field("stop_reason", &A::stop_reason, "What stopped this attempt, as JobResult.stop_reason."),
      field("stop_detail", &A::stop_detail, "What stopped this attempt, in words; \"\" when nothing did.")
          .as(FieldText::any),
      field("first_failure", &A::first_failure, "The first process that failed in this attempt (RankResult), or None."),
      field("ranks", &A::ranks, "Every process of this attempt (RankResult), in the plan's order.")
          .only(on_wire | in_python),
      field("root_cause", &A::root_cause,
            "That failure's root cause in one line (its exception, else its CANN error code line), or \"\".")
          .as(FieldText::any),
      field("restarted", &A::restarted, "The job was started again after this attempt."),
      field("decision", &A::decision,
            "Why the job was restarted after this attempt, or why not; \"\" for a job never to restart.")
          .as(FieldText::any));
}

struct JobResult {
  std::vector<RankResult> ranks;             ///< in the order given to the supervisor (the last attempt's)
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
  /// Every attempt, in order; the last is the one the other fields
  /// describe. One for a job that did not restart.
  std::vector<JobAttempt> attempts;

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

// In summary.json's order; what it shows in other words (the stop's
// details, the first failure's rank, the ranks with their devices) is
// written there.
constexpr auto fields_of(const JobResult*) {
  using J = JobResult;
  constexpr unsigned wire_python = on_wire | in_python;
  return std::make_tuple(
      field("ranks", &J::ranks, "Every rank of this machine, in the plan's order.").only(wire_python),
      field("first_failure", &J::first_failure, "Index in `ranks` of the first rank that failed (by time), or None.")
          .only(wire_python),
      field("tracking", &J::tracking, "How the ranks' exits were observed: \"pidfd\" or \"sigchld\".")
          .summary_as("process_tracking"),
      field("tracking_fallback", &J::tracking_fallback,
            "Why exits were tracked by SIGCHLD on a kernel with pidfds (clone() refused CLONE_PIDFD: a seccomp "
            "filter, qemu-user), or None.")
          .summary_as("process_tracking_fallback"),
      field("child_subreaper", &J::child_subreaper,
            "False when the job's supervisor process could not become a child subreaper: detached descendants were "
            "then found only by DAVINCIRUN_JOB_TAG."),
      field("stop_reason", &J::stop_reason,
            "\"none\", \"rank_failed\", \"requested\", \"timed_out\", \"signaled\", \"launcher_gone\", "
            "\"peer_failed\" (a rank on another server failed), \"peer_stopped\" (the job was stopped on another "
            "server), \"peer_lost\" (another server's agent, host or link lost, or never there) or \"stalled\" "
            "(the stall watchdog)."),
      field("stop_signal", &J::stop_signal, "The signal behind stop_reason 'signaled', else 0.").only(wire_python),
      field("stop_signal_origin", &J::stop_signal_origin).only(on_wire),
      field("stop_detail", &J::stop_detail,
            "What stopped the job, in the words its stop notice began with (\"stop requested\", \"rank 3 (pid 77) "
            "failed with exit code 1\"); \"\" when nothing stopped it.")
          .only(wire_python)
          .as(FieldText::any),
      field("stopped_in", &J::stopped_in,
            "The state of the job's life cycle its stop came in (\"running\", \"waiting_for_servers\"...; "
            "docs/architecture.md); \"done\" when nothing stopped it.")
          .only(wire_python),
      field("peer_stop", &J::peer_stop,
            "With stop_reason \"peer_failed\", \"peer_stopped\", \"peer_lost\" or \"stalled\": what the other server "
            "said (PeerStop), else None.")
          .only(wire_python),
      field("leftover_processes_killed", &J::leftover_processes_killed,
            "Processes the ranks left running outside their process groups, killed at the end."),
      field("attempts", &J::attempts,
            "Every attempt of the job (JobAttempt), the first run first; the other fields describe the last. One "
            "unless the job restarted (max_restarts)."),
      field("summary_error", &J::summary_error, "Why summary.json could not be written, or None.").only(wire_python));
}

}  // namespace davincirun
