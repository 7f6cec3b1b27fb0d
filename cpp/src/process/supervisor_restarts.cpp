// A Supervisor's restarts (supervisor.hpp, SupervisorOptions::max_restarts):
// entering `restarting` keeps the attempt that ended, entering `starting`
// again starts the next one, and a stop between them calls the restart off.
// The rest of the life cycle is supervisor_states.cpp.
#include <algorithm>

#include <fmt/format.h>

#include "common/text.hpp"
#include "davincirun/supervisor.hpp"
#include "process/rank_set.hpp"
#include "process/supervisor_event.hpp"

namespace davincirun {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

// The attempt that ends is kept with its verdict; the next one starts
// after the restart delay.
void Supervisor::enter_restarting() {
  JobAttempt over = current_attempt();
  over.restarted = true;
  attempts_.push_back(std::move(over));
  const JobAttempt& a = attempts_.back();
  const int of = options_.max_restarts + 1;
  std::string what = stop_.why.empty() ? std::string("it stopped") : stop_.why;
  if (!a.root_cause.empty()) what += fmt::format(" ({})", a.root_cause);
  log_notice(fmt::format("attempt {} of {}: {}; restarting the job in {} (attempt {} of {})", attempt_, of, what,
                         detail::duration_text(options_.restart_delay), attempt_ + 1, of));
  clocks_->restart_at = Clock::now() + options_.restart_delay;
  // The stall watchdog of several servers (the hub's) hears this server's
  // silence: it counts from here, not from the attempt's last line.
  last_output_ns_.store(0, std::memory_order_relaxed);
  run_started_ = Clock::now();
  // The attempt's stop is in its record: a stop now names the job's end.
  stop_ = StopRecord{};
}

// The next attempt: every process again, new logs, the clocks of an attempt anew.
void Supervisor::enter_starting() {
  ++attempt_;
  std::vector<RankLaunch> launches = restarts_.launches(attempt_);
  ranks_ = std::make_unique<detail::RankSet>();
  stop_ = StopRecord{};
  verdict_.reset();
  ruled_out_.clear();
  deferred_.clear();
  clocks_->kill_deadline.reset();
  clocks_->report_deadline.reset();
  clocks_->servers_done = false;
  clocks_->restart_ordered = false;
  clocks_->stall_fired = false;
  last_output_ns_.store(0, std::memory_order_relaxed);
  run_started_ = Clock::now();
  attempt_started_ = std::chrono::system_clock::now();
  spawn(std::move(launches));  // throws SpawnError: the job ends with it
  console_->attempt_started(attempt_, ranks_->pids());
  on(Event{JobEvent::ranks_started});
}

// The hub's word (a job of several servers) replaces this server's own:
// the job restarts, or ends, as one. A server whose processes had all
// exited 0 names the stop that came from elsewhere in its record.
void Supervisor::apply_decision(ServersDecision d) {
  if (!verdict_) verdict_ = AttemptVerdict{};
  verdict_->restart = d.restart;
  verdict_->decision = std::move(d.decision);
  if (verdict_->root_cause.empty()) verdict_->root_cause = std::move(d.root_cause);
  if (d.stop && stop_.reason == StopReason::none) {
    Event e{d.stop->first};
    e.peer = std::move(d.stop->second);
    begin_stop(e);
  }
  if (d.restart) clocks_->restart_ordered = true;  // taken in waiting_for_servers (fire_derived_events)
}

void Supervisor::say_restart_called_off(const Event& cause) {
  restart_called_off_ = true;
  JobAttempt& last = attempts_.back();
  last.restarted = false;
  const std::string why = cause.why.empty() ? describe_event(cause) : cause.why;
  last.decision = fmt::format("not restarted: the restart was called off: {}", why);
  log_notice(
      fmt::format("{} while the job waited to restart attempt {}: the restart is called off", why, attempt_ + 1));
}

// The current attempt as the record keeps it.
JobAttempt Supervisor::current_attempt() const {
  JobAttempt a;
  a.attempt = attempt_;
  a.started = attempt_started_;
  a.ended = attempt_started_;
  for (const auto& r : ranks_->ranks) a.ended = std::max(a.ended, r.result.ended);
  a.stop_reason = stop_.reason;
  a.stop_detail = stop_.why;
  if (stop_.first_failure) a.first_failure = ranks_->ranks[*stop_.first_failure].result;
  for (const auto& r : ranks_->ranks) a.ranks.push_back(r.result);
  if (verdict_) {
    a.root_cause = verdict_->root_cause;
    a.decision = verdict_->decision;
  }
  return a;
}

}  // namespace davincirun
