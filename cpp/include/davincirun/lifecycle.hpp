// The life cycle of a job on one server: its named states, the events that
// reach it, and one transition table that says what every event does in
// every state (docs/architecture.md, "The life cycle", is this table).
//
// A job lives in two processes: the launcher (the `davincirun` command, the
// Python API or your program) waits for the rank table and plans; its
// davincirun-supervisor process starts the ranks, runs them, stops them,
// drains their output, in a job of several servers waits for the other
// servers, and in a job that restarts (max_restarts) starts them again.
// The Supervisor (supervisor.hpp) is driven by this table: it looks each
// event up in the state it is in, does what the row says, and moves to the
// row's next state; entering a state does that state's work (SIGTERM on
// entering `stopping`, SIGKILL on entering `killing`, ...).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "davincirun/enum_names.hpp"

namespace davincirun {

/// Where a job is in its life, in the order the states normally come.
enum class JobState : std::uint8_t {
  waiting_for_table,    ///< launcher: the rank table is missing, empty, half-written or "initializing"
  planning,             ///< launcher: this server, its devices, each rank's environment (never waits)
  starting,             ///< supervisor: devices locked, run directory made, ranks started (about 1 ms a rank)
  running,              ///< the ranks run; in a job of several servers the agents join meanwhile
  stopping,             ///< SIGTERM sent to every rank still running; SIGKILL when the grace period is over
  killing,              ///< SIGKILL sent; waiting for the kernel to end the ranks
  draining,             ///< every rank has exited: what they left is swept, their last output read
  waiting_for_servers,  ///< this server's attempt is over; the job decides what follows (the other servers, a restart)
  restarting,           ///< the job restarts (max_restarts): the restart delay runs, then `starting` again
  done,                 ///< the result is known
};
/// to_string(): "waiting_for_table", "running", ...: the enumerator's name.
DAVINCIRUN_ENUM_NAMES(JobState, "waiting_for_table", "planning", "starting", "running", "stopping", "killing",
                      "draining", "waiting_for_servers", "restarting", "done");

/// What happens to a job. Every event has an answer in every state.
enum class JobEvent : std::uint8_t {
  // The job's own progress.
  table_ready,      ///< the rank table was read and is complete
  planned,          ///< the plan is made
  start_failed,     ///< the job cannot start (a broken table, a taken device, a command not found...)
  ranks_started,    ///< every rank has been started
  rank_exited,      ///< a rank exited 0
  rank_failed,      ///< a rank exited non-zero or by a signal, not after a stop of ours
  ranks_gone,       ///< the last rank still running has exited
  output_drained,   ///< every rank's output has been read to its end
  servers_done,     ///< hub: every other server is done; member: the hub knows this server is done
  restart_ordered,  ///< the attempt that ended is restarted (this server's policy; several servers: the hub's order)
  delay_over,       ///< the restart delay is over: the next attempt starts
  // Stops.
  stop_request,           ///< a person: Ctrl-C, the notebook's stop button, request_stop()
  repeated_stop_request,  ///< a person asking again
  kill_request,           ///< request_kill(): kill at once (a Job dropped while it runs)
  engine_signal,          ///< SIGTERM, SIGHUP or SIGQUIT to the launcher or its supervisor (a platform, an engine)
  launcher_gone,          ///< the launcher exited or was killed (its end of the lifeline closed)
  supervisor_gone,        ///< the supervisor process died before its result (SIGKILL, the OOM killer)
  job_timeout,            ///< LaunchOptions::timeout is reached
  grace_over,             ///< the grace period after SIGTERM is over
  stall,                  ///< no rank of the job wrote output for the stall timeout
  peer_failed,            ///< a rank on another server failed
  peer_stopped,           ///< the job was stopped on another server (a request, a signal, its timeout)
  peer_lost,              ///< a server that had joined went silent or closed its connection
  peer_never_joined,      ///< hub: a server's agent did not join within the wait timeout
  hub_unreachable,        ///< member: the agent of rank 0's server could not be reached within the wait timeout
};
/// to_string(): "stop_request", "peer_failed", ...: the enumerator's name.
DAVINCIRUN_ENUM_NAMES(JobEvent, "table_ready", "planned", "start_failed", "ranks_started", "rank_exited", "rank_failed",
                      "ranks_gone", "output_drained", "servers_done", "restart_ordered", "delay_over", "stop_request",
                      "repeated_stop_request", "kill_request", "engine_signal", "launcher_gone", "supervisor_gone",
                      "job_timeout", "grace_over", "stall", "peer_failed", "peer_stopped", "peer_lost",
                      "peer_never_joined", "hub_unreachable");

inline constexpr std::size_t job_state_count = enum_count<JobState>();
inline constexpr std::size_t job_event_count = enum_count<JobEvent>();

/// What an event does in a state.
enum class JobAnswer : std::uint8_t {
  proceed,     ///< the state's own next step: move to `next`
  stop,        ///< this event names the stop (unless one is named already); move to `next`
  escalate,    ///< a person asked again: SIGKILL now (`next` is killing)
  note,        ///< nothing changes; the event is recorded where it matters (a rank's exit)
  deferred,    ///< kept, and taken as soon as this short state ends (it never waits)
  ignored,     ///< no effect, for the reason given
  impossible,  ///< the event cannot reach this state, for the reason given
};
/// to_string(): "proceed", "stop", ...: the enumerator's name.
DAVINCIRUN_ENUM_NAMES(JobAnswer, "proceed", "stop", "escalate", "note", "deferred", "ignored", "impossible");

/// One cell of the table: `event` in `state`.
struct JobTransition {
  JobState state;
  JobEvent event;
  JobAnswer answer;
  JobState next;  ///< `state` itself unless the answer moves the job
  /// A stop of this server's own: the other servers of the job are told,
  /// and stop too (docs/multi-server.md).
  bool tells_peers;
  /// Why, in a few words: what the process does, or why nothing.
  const char* why;
};

/// The answer to `event` in `state`: exactly one cell of the table.
const JobTransition& job_transition(JobState state, JobEvent event) noexcept;

/// Every cell, state by state in declaration order, each state's events in
/// declaration order: job_state_count * job_event_count cells.
const std::vector<JobTransition>& job_transitions();

/// Whether a job that stops for `event` may restart (SupervisorOptions::
/// max_restarts): a rank's failure (here or on another server), a server
/// lost and the stall watchdog may; a person's stop, an engine's signal, the
/// launcher's death and the job timeout never do, and one of them arriving
/// during an attempt's stop (a `note` of the table) means the attempt is
/// not restarted either. docs/restarts.md says why.
bool restarts_after(JobEvent event) noexcept;

/// For tests: keep a job in one state for a while, to send it events there.
struct JobHold {
  JobState state = JobState::done;
  std::chrono::milliseconds duration{0};
};

/// The hold DAVINCIRUN_TEST_HOLD asks for: "<state>:<milliseconds>", e.g.
/// "draining:3000" (the launcher holds `planning`, its supervisor
/// process `starting`, `killing`, `draining` and `waiting_for_servers`).
/// nullopt when unset or empty. Throws ConfigError when it is malformed.
std::optional<JobHold> test_hold_from_environment();

}  // namespace davincirun
