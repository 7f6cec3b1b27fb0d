// The transition table of a job's life cycle (lifecycle.hpp). Each rule
// covers one event in one or more states; together they must cover every
// (state, event) cell exactly once, which job_transitions() checks when it
// expands them (and tests/cpp/test_lifecycle.cpp proves).
#include "davincirun/lifecycle.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#include "davincirun/errors.hpp"

namespace davincirun {

namespace {

using S = JobState;
using E = JobEvent;
using A = JobAnswer;

struct Rule {
  std::vector<S> states;
  E event;
  A answer;
  S next;  // S::done doubles as "stays" for answers that do not move: see `moves`
  bool peers;
  const char* why;
};

bool moves(A answer) { return answer == A::proceed || answer == A::stop || answer == A::escalate; }

// Groups of states, by what exists in them.
#define LAUNCHER S::waiting_for_table, S::planning
#define RANKS_RUN S::running, S::stopping, S::killing
#define AFTER_RANKS S::draining, S::waiting_for_servers, S::done
// Between two attempts of a job that restarts: no rank runs.
#define BETWEEN S::restarting

// The rules. Read "in these states, this event: answer → next".
const std::vector<Rule> rules = {
    // --- The job's own progress.
    {{S::waiting_for_table}, E::table_ready, A::proceed, S::planning, false, "plan the job"},
    {{S::planning, S::starting, RANKS_RUN, AFTER_RANKS, BETWEEN},
     E::table_ready,
     A::impossible,
     S::done,
     false,
     "the table is read once, before planning"},
    {{S::planning}, E::planned, A::proceed, S::starting, false, "start the supervisor process"},
    {{S::waiting_for_table, S::starting, RANKS_RUN, AFTER_RANKS, BETWEEN},
     E::planned,
     A::impossible,
     S::done,
     false,
     "a job is planned once"},
    {{LAUNCHER, S::starting},
     E::start_failed,
     A::proceed,
     S::done,
     false,
     "raise the error; what was started is killed (and a first attempt's new run directory removed)"},
    {{RANKS_RUN, AFTER_RANKS, BETWEEN},
     E::start_failed,
     A::impossible,
     S::done,
     false,
     "the attempt has started, or the next one starts on leaving restarting"},
    {{S::starting}, E::ranks_started, A::proceed, S::running, false, "relay output, watch exits"},
    {{LAUNCHER, RANKS_RUN, AFTER_RANKS, BETWEEN},
     E::ranks_started,
     A::impossible,
     S::done,
     false,
     "ranks are started once, while starting"},
    {{S::starting}, E::rank_exited, A::deferred, S::done, false, "exits are read once every rank has started"},
    {{RANKS_RUN}, E::rank_exited, A::note, S::done, false, "its exit status and output are recorded"},
    {{LAUNCHER, AFTER_RANKS, BETWEEN}, E::rank_exited, A::impossible, S::done, false, "no rank is running"},
    {{S::starting}, E::rank_failed, A::deferred, S::done, false, "exits are read once every rank has started"},
    {{S::running},
     E::rank_failed,
     A::stop,
     S::stopping,
     true,
     "the first failure is the root cause: SIGTERM to every other rank"},
    {{S::stopping, S::killing},
     E::rank_failed,
     A::impossible,
     S::done,
     false,
     "every rank still running was told to stop on entering stopping: how it ends is a consequence (rank_exited)"},
    {{LAUNCHER, AFTER_RANKS, BETWEEN}, E::rank_failed, A::impossible, S::done, false, "no rank is running"},
    {{RANKS_RUN},
     E::ranks_gone,
     A::proceed,
     S::draining,
     false,
     "kill what the ranks left running, read their last output"},
    {{LAUNCHER, S::starting, AFTER_RANKS, BETWEEN},
     E::ranks_gone,
     A::impossible,
     S::done,
     false,
     "only an exit seen while ranks run can be the last"},
    {{S::draining},
     E::output_drained,
     A::proceed,
     S::waiting_for_servers,
     false,
     "a job of one server, or one whose stop is named, is done at once"},
    {{LAUNCHER, S::starting, RANKS_RUN, S::waiting_for_servers, S::done, BETWEEN},
     E::output_drained,
     A::impossible,
     S::done,
     false,
     "output is drained once, after the last rank exited"},
    {{S::waiting_for_servers}, E::servers_done, A::proceed, S::done, false, "deliver the result"},
    {{LAUNCHER, S::starting, RANKS_RUN, S::draining, S::done},
     E::servers_done,
     A::impossible,
     S::done,
     false,
     "the agent is done only after this server is: it hears so on entering waiting_for_servers"},
    {{BETWEEN},
     E::servers_done,
     A::impossible,
     S::done,
     false,
     "a job that restarts is not done: the servers go on together"},
    {{S::waiting_for_servers},
     E::restart_ordered,
     A::proceed,
     S::restarting,
     false,
     "the attempt is over and the job restarts: the restart delay runs"},
    {{LAUNCHER, S::starting, RANKS_RUN, S::draining},
     E::restart_ordered,
     A::impossible,
     S::done,
     false,
     "a restart is decided once the attempt's ranks are gone and their output drained"},
    {{BETWEEN, S::done},
     E::restart_ordered,
     A::impossible,
     S::done,
     false,
     "one decision per attempt, and none once the job is over"},
    {{BETWEEN}, E::delay_over, A::proceed, S::starting, false, "start every rank again: the next attempt"},
    {{LAUNCHER, S::starting, RANKS_RUN, AFTER_RANKS},
     E::delay_over,
     A::impossible,
     S::done,
     false,
     "the restart delay runs only while restarting"},

    // --- A person's stop: Ctrl-C, the notebook's stop button, request_stop().
    {{LAUNCHER}, E::stop_request, A::stop, S::done, false, "nothing was started: stop waiting, raise"},
    {{S::starting},
     E::stop_request,
     A::deferred,
     S::done,
     false,
     "taken once every rank has started (starting never waits)"},
    {{S::running}, E::stop_request, A::stop, S::stopping, true, "SIGTERM to every rank"},
    {{S::stopping},
     E::stop_request,
     A::escalate,
     S::killing,
     false,
     "a person asking while a stop is under way: SIGKILL now"},
    {{S::killing}, E::stop_request, A::note, S::done, false, "SIGKILL is sent already; the job is not restarted"},
    {{S::draining, S::waiting_for_servers},
     E::stop_request,
     A::stop,
     S::done,
     true,
     "the ranks are gone: stop reading what their leftovers hold, stop waiting"},
    {{S::done}, E::stop_request, A::ignored, S::done, false, "the job is over"},
    {{BETWEEN},
     E::stop_request,
     A::stop,
     S::done,
     true,
     "no rank is running: the restart is called off, and the stop names the job's end"},
    {{S::starting},
     E::repeated_stop_request,
     A::deferred,
     S::done,
     false,
     "taken once every rank has started, after the first"},
    {{S::stopping}, E::repeated_stop_request, A::escalate, S::killing, false, "a second Ctrl-C: SIGKILL now"},
    {{S::killing},
     E::repeated_stop_request,
     A::note,
     S::done,
     false,
     "nothing is left to kill; the job is not restarted"},
    {{S::done}, E::repeated_stop_request, A::ignored, S::done, false, "nothing is left to kill"},
    {{S::draining, S::waiting_for_servers},
     E::repeated_stop_request,
     A::stop,
     S::done,
     false,
     "a second Ctrl-C once the first one's stop ended the ranks: stop reading what their leftovers hold, stop "
     "waiting (a hub waits for servers that have not joined to learn the stop)"},
    {{LAUNCHER, S::running},
     E::repeated_stop_request,
     A::impossible,
     S::done,
     false,
     "the first request has left this state"},
    {{BETWEEN},
     E::repeated_stop_request,
     A::impossible,
     S::done,
     false,
     "a stop request during an attempt means it is not restarted; one in restarting ends the job"},
    {{S::starting}, E::kill_request, A::deferred, S::done, false, "taken once every rank has started"},
    {{S::running, S::stopping}, E::kill_request, A::escalate, S::killing, false, "SIGKILL to every rank now"},
    {{S::killing}, E::kill_request, A::note, S::done, false, "nothing is left to kill; the job is not restarted"},
    {{S::done}, E::kill_request, A::ignored, S::done, false, "nothing is left to kill"},
    {{S::draining, S::waiting_for_servers}, E::kill_request, A::stop, S::done, true, "the ranks are gone: end now"},
    {{BETWEEN}, E::kill_request, A::stop, S::done, true, "no rank is running: the restart is called off"},
    {{LAUNCHER}, E::kill_request, A::impossible, S::done, false, "there is no Job to kill yet"},

    // --- A platform or an engine: SIGTERM, SIGHUP (unless ignored, as under nohup) or SIGQUIT.
    {{LAUNCHER}, E::engine_signal, A::stop, S::done, false, "nothing was started: exit 128+N"},
    {{S::starting}, E::engine_signal, A::deferred, S::done, false, "taken once every rank has started"},
    {{S::running}, E::engine_signal, A::stop, S::stopping, true, "SIGTERM to every rank; never escalates"},
    {{S::stopping, S::killing},
     E::engine_signal,
     A::note,
     S::done,
     false,
     "one stop: an engine signals every process of the job, and the grace period holds; the job is not restarted"},
    {{S::draining, S::waiting_for_servers}, E::engine_signal, A::stop, S::done, true, "the ranks are gone: end now"},
    {{BETWEEN}, E::engine_signal, A::stop, S::done, true, "no rank is running: an engine's stop is never restarted"},
    {{S::done}, E::engine_signal, A::ignored, S::done, false, "the job is over"},

    // --- The launcher is gone: its end of the lifeline closed.
    {{LAUNCHER}, E::launcher_gone, A::stop, S::done, false, "nothing was started: nothing is left"},
    {{S::starting}, E::launcher_gone, A::deferred, S::done, false, "taken once every rank has started"},
    {{S::running},
     E::launcher_gone,
     A::stop,
     S::stopping,
     true,
     "SIGTERM to every rank, SIGKILL after the grace period: nobody is left to ask for it"},
    {{S::stopping, S::killing},
     E::launcher_gone,
     A::note,
     S::done,
     false,
     "the stop goes on as it is; the job is not restarted"},
    {{S::draining, S::waiting_for_servers},
     E::launcher_gone,
     A::stop,
     S::done,
     true,
     "the ranks are gone: end now, freeing the devices"},
    {{BETWEEN}, E::launcher_gone, A::stop, S::done, true, "nobody is left to watch a next attempt: end now"},
    {{S::done}, E::launcher_gone, A::ignored, S::done, false, "the job is over"},

    // --- The supervisor process died (the launcher sees its lifeline close without a result).
    {{LAUNCHER}, E::supervisor_gone, A::impossible, S::done, false, "no supervisor process is started yet"},
    {{S::starting, RANKS_RUN, S::draining, S::waiting_for_servers, BETWEEN},
     E::supervisor_gone,
     A::stop,
     S::done,
     false,
     "its ranks die with it (PR_SET_PDEATHSIG) and the kernel frees its device locks; the launcher kills what "
     "carries the job's tag and raises; the other servers see its agent go"},
    {{S::done}, E::supervisor_gone, A::ignored, S::done, false, "its result was delivered"},

    // --- Clocks.
    {{LAUNCHER}, E::job_timeout, A::ignored, S::done, false, "the job timeout counts from the start of the ranks"},
    {{S::starting},
     E::job_timeout,
     A::impossible,
     S::done,
     false,
     "the job timeout counts from the start of the ranks"},
    {{S::running}, E::job_timeout, A::stop, S::stopping, true, "SIGTERM to every rank"},
    {{S::stopping, S::killing},
     E::job_timeout,
     A::note,
     S::done,
     false,
     "a stop is under way; the job is not restarted"},
    {{S::draining}, E::job_timeout, A::deferred, S::done, false, "taken once the output is drained"},
    {{S::waiting_for_servers}, E::job_timeout, A::stop, S::done, true, "stop waiting for the other servers"},
    {{S::done}, E::job_timeout, A::ignored, S::done, false, "the job is over"},
    {{BETWEEN},
     E::job_timeout,
     A::stop,
     S::done,
     true,
     "the job timeout counts from the first attempt's start: no next attempt"},
    {{S::stopping}, E::grace_over, A::proceed, S::killing, false, "SIGKILL to every rank still running"},
    {{LAUNCHER, S::starting, S::running, S::killing, AFTER_RANKS, BETWEEN},
     E::grace_over,
     A::impossible,
     S::done,
     false,
     "the grace period runs only while stopping"},
    {{S::running},
     E::stall,
     A::stop,
     S::stopping,
     true,
     "the ranks' Python stacks are written to <run>/stacks, then SIGTERM to every rank"},
    {{S::stopping, S::killing}, E::stall, A::ignored, S::done, false, "a stop is under way"},
    {{S::draining}, E::stall, A::ignored, S::done, false, "the watchdog watches running ranks only"},
    {{S::waiting_for_servers},
     E::stall,
     A::stop,
     S::done,
     false,
     "every server still running is silent (the hub decides, its own ranks done): stop waiting"},
    {{S::done}, E::stall, A::ignored, S::done, false, "the job is over"},
    {{LAUNCHER, S::starting}, E::stall, A::impossible, S::done, false, "the watchdog starts with the ranks"},
    {{BETWEEN},
     E::stall,
     A::impossible,
     S::done,
     false,
     "the watchdog watches an attempt's ranks; it starts again with the next attempt"},
};

// --- Another server (several servers only): the same answer for each event.
constexpr E peer_events[] = {E::peer_failed, E::peer_stopped, E::peer_lost, E::peer_never_joined, E::hub_unreachable};

std::vector<Rule> all_rules() {
  std::vector<Rule> out = rules;
  for (const E e : peer_events) {
    out.push_back(
        {{LAUNCHER, S::starting}, e, A::impossible, S::done, false, "the agents talk once the ranks have started"});
    out.push_back({{S::running}, e, A::stop, S::stopping, false, "SIGTERM to every rank (the hub told everyone)"});
    out.push_back({{S::stopping, S::killing},
                   e,
                   A::impossible,
                   S::done,
                   false,
                   "the hub tells a server one event, the job's first; links lost after it are quiet"});
    out.push_back({{S::draining},
                   e,
                   A::stop,
                   S::draining,
                   false,
                   "the ranks are gone; their last output is read, then the job is done"});
    out.push_back({{S::waiting_for_servers}, e, A::stop, S::done, false, "stop waiting"});
    out.push_back(e == E::hub_unreachable
                      ? Rule{{S::done},
                             e,
                             A::impossible,
                             S::done,
                             false,
                             "a member is done only once it reached the hub, or gave up telling it"}
                      : Rule{{S::done},
                             e,
                             A::ignored,
                             S::done,
                             false,
                             "this server's part is over: what happens elsewhere later does not change it"});
    if (e == E::peer_never_joined || e == E::hub_unreachable) {
      out.push_back(
          {{BETWEEN}, e, A::impossible, S::done, false, "a job restarts only once every server's agent has joined"});
    } else {
      // Another server was stopped, lost, or its next attempt failed before
      // this server's began (the restart delays end at slightly different times).
      out.push_back({{BETWEEN}, e, A::stop, S::done, false, "no rank is running: the restart is called off"});
    }
  }
  return out;
}

#undef LAUNCHER
#undef RANKS_RUN
#undef AFTER_RANKS
#undef BETWEEN

std::vector<JobTransition> expand() {
  const std::vector<Rule> all = all_rules();
  std::vector<JobTransition> cells;
  for (std::size_t s = 0; s < job_state_count; ++s) {
    for (std::size_t e = 0; e < job_event_count; ++e) {
      const Rule* found = nullptr;
      for (const Rule& rule : all) {
        if (static_cast<std::size_t>(rule.event) != e) continue;
        for (const S state : rule.states) {
          if (static_cast<std::size_t>(state) != s) continue;
          if (found != nullptr) {
            throw std::logic_error(std::string("two answers to ") + to_string(static_cast<E>(e)) + " in " +
                                   to_string(static_cast<S>(s)));
          }
          found = &rule;
        }
      }
      if (found == nullptr) {
        throw std::logic_error(std::string("no answer to ") + to_string(static_cast<E>(e)) + " in " +
                               to_string(static_cast<S>(s)));
      }
      const auto state = static_cast<S>(s);
      cells.push_back({state, static_cast<E>(e), found->answer, moves(found->answer) ? found->next : state,
                       found->peers, found->why});
    }
  }
  return cells;
}

}  // namespace

const std::vector<JobTransition>& job_transitions() {
  static const std::vector<JobTransition> cells = expand();
  return cells;
}

std::optional<JobHold> test_hold_from_environment() {
  const char* value = std::getenv("DAVINCIRUN_TEST_HOLD");
  if (value == nullptr || *value == '\0') return std::nullopt;
  const std::string text(value);
  const std::size_t colon = text.find(':');
  const auto bad = [&] {
    return ConfigError("DAVINCIRUN_TEST_HOLD=" + text + ": expected <state>:<milliseconds>, e.g. draining:3000");
  };
  if (colon == std::string::npos) throw bad();
  JobHold hold;
  const auto state = enum_parse<JobState>(std::string_view(text).substr(0, colon));
  if (!state) throw bad();
  hold.state = *state;
  char* end = nullptr;
  const long long ms = std::strtoll(text.c_str() + colon + 1, &end, 10);
  if (end == text.c_str() + colon + 1 || *end != '\0' || ms < 0 || ms > 3'600'000) throw bad();
  hold.duration = std::chrono::milliseconds(ms);
  return hold;
}

bool restarts_after(JobEvent event) noexcept {
  switch (event) {
    case E::rank_failed:
    case E::stall:
    case E::peer_failed:
    case E::peer_lost: return true;
    default: return false;
  }
}

const JobTransition& job_transition(JobState state, JobEvent event) noexcept {
  return job_transitions()[static_cast<std::size_t>(state) * job_event_count + static_cast<std::size_t>(event)];
}

}  // namespace davincirun
