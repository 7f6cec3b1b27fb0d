// The Supervisor's life cycle: every event is looked up in the transition
// table (lifecycle.hpp) for the state the job is in, and entering a state
// does that state's work. The loop that finds the events is supervisor.cpp.
#include <signal.h>

#include <algorithm>

#include <fmt/format.h>

#include "common/proc.hpp"
#include "common/text.hpp"
#include "davincirun/supervisor.hpp"
#include "process/descendants.hpp"
#include "process/rank_set.hpp"
#include "process/request_inbox.hpp"
#include "process/stop_notice.hpp"
#include "process/supervisor_event.hpp"

namespace davincirun {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Descendants the ranks left behind are SIGKILLed within this time.
constexpr milliseconds sweep_budget{5'000};
// A state that waits says so: first after this (a member that only tells
// the hub it is done is through long before), then every wait_line_period.
constexpr milliseconds first_wait_line{500};
constexpr milliseconds wait_line_period{30'000};

StopReason reason_of(JobEvent event) {
  switch (event) {
    case JobEvent::rank_failed: return StopReason::rank_failed;
    case JobEvent::engine_signal: return StopReason::signaled;
    case JobEvent::launcher_gone: return StopReason::launcher_gone;
    case JobEvent::job_timeout: return StopReason::timed_out;
    case JobEvent::stall: return StopReason::stalled;
    case JobEvent::peer_failed: return StopReason::peer_failed;
    case JobEvent::peer_stopped: return StopReason::peer_stopped;
    case JobEvent::peer_lost:
    case JobEvent::peer_never_joined:
    case JobEvent::hub_unreachable: return StopReason::peer_lost;
    default: return StopReason::requested;
  }
}

// "SIGTERM", or "signal 40" for one without a name.
std::string signal_text(int signal) {
  const char* name = detail::signal_name(signal);
  return name != nullptr ? fmt::format("SIG{}", name) : fmt::format("signal {}", signal);
}

// The states in which ranks may run (the ticker's).
bool ranks_run(JobState s) { return s == JobState::running || s == JobState::stopping || s == JobState::killing; }

}  // namespace

bool Supervisor::held() const { return clocks_->hold_until && Clock::now() < *clocks_->hold_until; }

void Supervisor::on(const Event& event) {
  const JobState from = state();
  const JobTransition& cell = job_transition(from, event.kind);
  // A person's stop, an engine's signal, the launcher gone or the job
  // timeout during an attempt: it is not restarted (restarts_after()).
  const bool counts = cell.answer == JobAnswer::stop || cell.answer == JobAnswer::escalate ||
                      (cell.answer == JobAnswer::note && event.kind != JobEvent::rank_exited);
  if (counts && !restarts_after(event.kind) && ruled_out_.empty()) {
    ruled_out_ = event.why.empty() ? describe_event(event) : event.why;
  }
  switch (cell.answer) {
    case JobAnswer::deferred: deferred_.push_back(event); [[fallthrough]];
    case JobAnswer::note:
    case JobAnswer::ignored:
    case JobAnswer::impossible:
      if (journal_)
        journal_(
            fmt::format("{} in {}: {} ({})", to_string(event.kind), to_string(from), to_string(cell.answer), cell.why));
      return;
    case JobAnswer::proceed:
      if (cell.next != from) enter(cell.next, event);
      return;
    case JobAnswer::stop:
    case JobAnswer::escalate: break;
  }
  const bool names = stop_.reason == StopReason::none;
  if (names) begin_stop(event);
  if (cell.next != from) {
    enter(cell.next, event);
  } else if (journal_) {
    journal_(fmt::format("{} in {}: {} ({})", to_string(event.kind), to_string(from), to_string(cell.answer),
                         names ? "names the stop" : "the stop is named already"));
  }
  // Told once this server's SIGTERMs are out: the peer channel then reads
  // the failed rank's log for its root cause.
  if (cell.tells_peers && names && link_.local_stop) {
    link_.local_stop(stop_.reason, stop_.first_failure ? &ranks_->ranks[*stop_.first_failure].result : nullptr,
                     stop_.why);
  }
}

// The first event of a stop names it, for the record and the notices.
void Supervisor::begin_stop(const Event& e) {
  stop_.reason = reason_of(e.kind);
  stop_.in = state();
  if (e.kind == JobEvent::rank_failed) stop_.first_failure = e.rank;
  if (e.peer) stop_.peer = e.peer;
  if (e.kind == JobEvent::engine_signal) {
    stop_.signal = e.signal;
    stop_.origin = e.origin;
  }
  stop_.why = e.why.empty() ? describe_event(e) : e.why;
}

std::string Supervisor::describe_event(const Event& e) const {
  switch (e.kind) {
    case JobEvent::stop_request: return "stop requested";
    case JobEvent::repeated_stop_request: return "stop requested again";
    case JobEvent::kill_request:
      return e.dropped ? "the job was dropped (its handle destroyed) before it ended" : "kill requested";
    case JobEvent::engine_signal: {
      const SignalOrigin& o = e.origin;
      std::string who = o.receiver == SignalReceiver::launcher ? options_.launcher_name : "its supervisor process";
      std::string from;
      if (o.sender_pid > 0) {
        from = o.sender_name.empty() ? fmt::format(" from pid {}", o.sender_pid)
                                     : fmt::format(" from pid {} ({})", o.sender_pid, o.sender_name);
      }
      return fmt::format("{} got {}{}", who, signal_text(e.signal), from);
    }
    case JobEvent::launcher_gone: return fmt::format("{} is gone (it exited or was killed)", options_.launcher_name);
    case JobEvent::job_timeout:
      return fmt::format("the job timeout of {} is reached", detail::duration_text(options_.job_timeout));
    case JobEvent::stall:
      if (e.peer) return describe(StopReason::stalled, *e.peer);
      return fmt::format("the job stalled (no rank of the job wrote any output for {:.1f} s)",
                         static_cast<double>(silent_ms()) / 1000.0);
    default:
      if (e.peer) return describe(reason_of(e.kind), *e.peer);
      return to_string(e.kind);
  }
}

void Supervisor::enter(JobState next, const Event& cause) {
  const JobState from = state();
  state_.store(next, std::memory_order_relaxed);
  const auto now = Clock::now();
  clocks_->entered = now;
  clocks_->hold_until.reset();
  if (next == options_.hold_state && options_.hold.count() > 0) clocks_->hold_until = now + options_.hold;
  if (journal_) journal_(fmt::format("{} -> {} on {}", to_string(from), to_string(next), to_string(cause.kind)));
  switch (next) {
    case JobState::running:
      if (options_.job_timeout.count() > 0 && !clocks_->job_deadline_armed) {
        clocks_->job_deadline = now + options_.job_timeout;
      }
      clocks_->job_deadline_armed = true;
      break;
    case JobState::restarting: enter_restarting(); break;
    case JobState::starting: enter_starting(); break;
    case JobState::stopping: enter_stopping(cause); break;
    case JobState::killing: enter_killing(cause); break;
    case JobState::draining: enter_draining(); break;
    case JobState::waiting_for_servers: enter_waiting(); break;
    case JobState::done: enter_done(from, cause); break;
    default: break;
  }
}

// SIGTERM to every rank still running, in one notice: why, how many, when SIGKILL follows.
void Supervisor::enter_stopping(const Event& cause) {
  const bool failure = cause.kind == JobEvent::rank_failed;
  const detail::RankSet::Reached reached = ranks_->terminate_running();
  if (reached.none()) {
    log_notice(stop_.why + (failure ? "; no other rank is running" : ": no rank is running"));
    return;
  }
  const milliseconds grace = stop_grace();
  clocks_->kill_deadline = Clock::now() + grace;
  if (grace > detail::stop_report_delay) clocks_->report_deadline = Clock::now() + detail::stop_report_delay;
  const std::string whom =
      reached.ranks == 0 ? std::string("the scheduler")
                         : fmt::format("{} rank(s){}", reached.ranks, reached.scheduler ? " and the scheduler" : "");
  log_notice(fmt::format("{}{}{} (SIGTERM); {}", stop_.why,
                         failure && reached.ranks > 0 ? "; stopping the other " : ": stopping ", whom,
                         grace.count() == 0 && options_.kill_on_failure
                             ? std::string("SIGKILL at once: TensorFlow takes SIGTERM for a preemption notice and "
                                           "keeps running (launch mode tf-config)")
                             : detail::kill_hint(grace, asker(), stop_.reason == StopReason::requested)));
}

milliseconds Supervisor::stop_grace() const {
  const bool failure = stop_.reason == StopReason::rank_failed || stop_.reason == StopReason::peer_failed ||
                       stop_.reason == StopReason::peer_lost;
  return failure && options_.kill_on_failure ? milliseconds(0) : options_.grace_period;
}

void Supervisor::enter_killing(const Event& cause) {
  const std::vector<detail::RunningRank> running = ranks_->running();
  switch (cause.kind) {
    case JobEvent::grace_over:
      if (!running.empty() && stop_grace().count() > 0) {
        log_notice(fmt::format("grace period of {:.1f} s is over: killing the ranks still running: {}",
                               std::chrono::duration<double>(stop_grace()).count(), detail::describe_running(running)));
      }
      break;
    case JobEvent::kill_request:
      log_notice(cause.dropped ? "the job was dropped (its handle destroyed) before it ended: killing every rank now"
                               : "kill requested: killing every rank now");
      break;
    case JobEvent::stop_request:
      log_notice(stop_.reason == StopReason::requested ? "stop requested again: killing every rank now"
                                                       : "stop requested while the job was stopping: killing every "
                                                         "rank now");
      break;
    default: log_notice("stop requested again: killing every rank now"); break;
  }
  ranks_->kill_running();
}

// Every rank has exited: what they left running anywhere below this process
// is killed (the subreaper's sweep), and their last output is read.
void Supervisor::enter_draining() {
  if (!options_.owns_all_children) return;
  // Members of the ranks' own process groups were SIGKILLed with their
  // leader and may still be dying; only processes outside them count.
  const std::vector<pid_t> rank_groups = ranks_->pids();
  std::size_t killed = detail::kill_all_descendants(sweep_budget, rank_groups);
  // Not a subreaper: what a rank detached went to init, beyond the walk by
  // ancestry; the job's tag in its environment still finds it.
  if (!child_subreaper_ && !options_.job_tag.empty()) {
    killed += detail::kill_tagged_processes(options_.job_tag, sweep_budget, rank_groups);
  }
  leftovers_killed_ += killed;
  if (killed > 0) {
    log_notice(fmt::format("killed {} process(es) the ranks left running (outside their process groups)", killed));
  }
}

void Supervisor::enter_waiting() {
  if (options_.max_restarts > 0 && restarts_.judge) {
    verdict_ = restarts_.judge(result(), ruled_out_);
    if (journal_ && !verdict_->decision.empty()) {
      journal_(fmt::format("this server's verdict on attempt {}: {}", attempt_, verdict_->decision));
    }
  }
  if (!link_.local_done) {
    // A job of one server has nobody to wait for: it restarts or is done.
    (verdict_ && verdict_->restart ? clocks_->restart_ordered : clocks_->servers_done) = true;
    return;
  }
  bool success = stop_.reason == StopReason::none;
  for (const auto& r : ranks_->ranks) success = success && r.result.status.success();
  link_.local_done(success, verdict_ ? &*verdict_ : nullptr, result());
  clocks_->next_wait_line = Clock::now() + first_wait_line;
}

void Supervisor::enter_done(JobState from, const Event& cause) {
  if (from == JobState::restarting) {
    say_restart_called_off(cause);
    return;
  }
  const bool stopped_here =
      (from == JobState::draining || from == JobState::waiting_for_servers) && cause.kind != JobEvent::servers_done;
  if (stopped_here) {
    const std::string why = cause.why.empty() ? describe_event(cause) : cause.why;
    log_notice(from == JobState::waiting_for_servers && link_.waiting_for
                   ? fmt::format("{} while this server waited for {}: stopped waiting", why, link_.waiting_for())
                   : fmt::format("{} after every rank had exited", why));
  }
  // Output a leftover still holds is not waited for any longer.
  for (std::size_t i = 0; i < ranks_->ranks.size(); ++i) close_output(i);
}

void Supervisor::take_requests() {
  for (ServersDecision& d : inbox_->take_decisions()) apply_decision(std::move(d));
  for (detail::RequestInbox::Request& r : inbox_->take()) {
    Event e{r.event};
    e.signal = r.signal;
    e.origin = std::move(r.origin);
    // Read while the sender (kill, timeout, scancel) may still be there.
    if (e.origin.sender_pid > 0 && e.origin.sender_name.empty()) {
      e.origin.sender_name = detail::command_name(e.origin.sender_pid);
    }
    e.peer = std::move(r.peer);
    e.dropped = r.dropped;
    if (e.kind == JobEvent::servers_done) {
      clocks_->servers_done = true;
      if (state() == JobState::waiting_for_servers) continue;  // taken by fire_derived_events(), after any hold
    }
    on(e);
    if (state() == JobState::done) return;
  }
}

// The clocks' events, each once, whatever the state: the table says what
// they do there (a job timeout during a stop is ignored, for one).
void Supervisor::check_clocks() {
  const auto now = Clock::now();
  if (clocks_->job_deadline && now >= *clocks_->job_deadline) {
    clocks_->job_deadline.reset();
    on(Event{JobEvent::job_timeout});
  }
  if (clocks_->report_deadline && now >= *clocks_->report_deadline) report_still_running();
  if (clocks_->kill_deadline && now >= *clocks_->kill_deadline) {
    clocks_->kill_deadline.reset();
    if (state() == JobState::stopping) on(Event{JobEvent::grace_over});
  }
  auto& ranks = ranks_->ranks;
  for (std::size_t i = 0; ranks_->draining > 0 && i < ranks.size(); ++i) {
    const auto& r = ranks[i];
    if (r.drain_deadline && r.log.open() && now >= *r.drain_deadline) {
      log_notice(
          fmt::format("{}: a process that left its process group still holds its output open; no longer "
                      "reading it",
                      process_name(r.result.role, r.result.rank)));
      close_output(i);
    }
  }
  if (stall_due()) {
    clocks_->stall_fired = true;
    Event stall{JobEvent::stall};
    stall.why = describe_event(stall);
    if (link_.before_stall_stop && job_transition(state(), JobEvent::stall).answer == JobAnswer::stop) {
      log_notice(link_.before_stall_stop(stall.why));
    }
    on(stall);
  }
  if (ticker_ && ranks_run(state())) {
    if (!clocks_->next_tick) clocks_->next_tick = now + tick_period_;
    if (now >= *clocks_->next_tick) {
      clocks_->next_tick = now + tick_period_;
      ticker_();
    }
  }
  if (clocks_->restart_at && now >= *clocks_->restart_at && state() == JobState::restarting) {
    clocks_->restart_at.reset();
    on(Event{JobEvent::delay_over});
  }
  if (state() == JobState::waiting_for_servers && clocks_->next_wait_line && now >= *clocks_->next_wait_line) {
    say_waiting();
    clocks_->next_wait_line = now + wait_line_period;
  }
}

// This server's stall watchdog (one server only): once, while its ranks
// or their output are still there.
bool Supervisor::stall_due() const {
  const JobState s = state();
  return options_.stall_timeout.count() > 0 && !clocks_->stall_fired &&
         (s == JobState::running || s == JobState::stopping || s == JobState::killing || s == JobState::draining) &&
         silent_ms() >= static_cast<std::uint64_t>(options_.stall_timeout.count());
}

// The events that follow from what is known: the last rank gone, the
// output drained, the other servers done (each kept while a hold lasts).
void Supervisor::fire_derived_events() {
  for (;;) {
    const JobState s = state();
    if (held()) return;
    if ((s == JobState::running || s == JobState::stopping || s == JobState::killing) && ranks_->live == 0) {
      on(Event{JobEvent::ranks_gone});
    } else if (s == JobState::draining && ranks_->open_logs == 0) {
      on(Event{JobEvent::output_drained});
    } else if (s == JobState::waiting_for_servers && clocks_->restart_ordered) {
      clocks_->restart_ordered = false;
      on(Event{JobEvent::restart_ordered});
    } else if (s == JobState::waiting_for_servers && clocks_->servers_done) {
      on(Event{JobEvent::servers_done});
    } else {
      break;
    }
  }
  // What a short state kept is taken in the state after it.
  std::vector<Event> kept;
  kept.swap(deferred_);
  for (const Event& e : kept) {
    if (job_transition(state(), e.kind).answer == JobAnswer::deferred) {
      deferred_.push_back(e);  // still the same short state
    } else {
      on(e);
    }
  }
}

int Supervisor::next_timeout_ms() const {
  const JobState s = state();
  std::optional<Clock::time_point> next;
  const auto consider = [&](const std::optional<Clock::time_point>& t) {
    if (t && (!next || *t < *next)) next = t;
  };
  consider(clocks_->job_deadline);
  consider(clocks_->kill_deadline);
  consider(clocks_->report_deadline);
  if (s == JobState::waiting_for_servers) consider(clocks_->next_wait_line);
  consider(clocks_->hold_until);
  if (s == JobState::restarting) consider(clocks_->restart_at);
  if (ticker_ && ranks_run(s)) consider(clocks_->next_tick);
  if (options_.stall_timeout.count() > 0 && !clocks_->stall_fired && s != JobState::waiting_for_servers) {
    const auto silent = milliseconds(static_cast<std::int64_t>(silent_ms()));
    consider(Clock::now() + std::max(milliseconds(0), options_.stall_timeout - silent));
  }
  for (std::size_t i = 0; ranks_->draining > 0 && i < ranks_->ranks.size(); ++i) {
    const auto& r = ranks_->ranks[i];
    if (r.log.open()) consider(r.drain_deadline);
  }
  if (!next) return -1;
  const auto left = std::chrono::ceil<milliseconds>(*next - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

// The ranks that outlive SIGTERM, named once.
void Supervisor::report_still_running() {
  clocks_->report_deadline.reset();
  if (state() != JobState::stopping) return;
  const std::vector<detail::RunningRank> running = ranks_->running();
  if (running.empty() || !clocks_->kill_deadline) return;
  const auto left = std::chrono::ceil<milliseconds>(*clocks_->kill_deadline - Clock::now());
  log_notice(fmt::format(
      "still running {:g} s after SIGTERM: {}; {}", std::chrono::duration<double>(detail::stop_report_delay).count(),
      detail::describe_running(running), detail::kill_hint(left, asker(), stop_.reason == StopReason::requested)));
}

void Supervisor::say_waiting() {
  const auto waited = std::chrono::duration_cast<milliseconds>(Clock::now() - clocks_->entered);
  const std::string request = asker();
  log_notice(
      fmt::format("{}; waiting for {}; waited {}{}",
                  stop_.reason == StopReason::none ? "this server's ranks are done" : "this server's job is stopped",
                  link_.waiting_for ? link_.waiting_for() : std::string("the other servers"),
                  detail::duration_text(waited), request.empty() ? "" : "; " + request + " stops the job"),
      true);
}

// Who can still ask for a stop: nobody once the launcher is gone.
std::string Supervisor::asker() const {
  return stop_.reason == StopReason::launcher_gone ? std::string() : options_.stop_request_name;
}

void Supervisor::log_notice(const std::string& text, bool info) {
  if (journal_) journal_(text);
  if (!(info && options_.quiet)) console_->notice(notice_line(text));
}

void Supervisor::flush_posted_notices() {
  for (const auto& [text, info] : inbox_->take_notices()) log_notice(text, info);
}

}  // namespace davincirun
