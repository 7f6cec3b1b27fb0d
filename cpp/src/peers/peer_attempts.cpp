// A peer agent's attempts (peer_agent.hpp): a member says its server's
// attempt is over; in a job that restarts, the hub decides for the whole job
// once it heard every server, every agent hands the decision to its owner
// and starts the next attempt afresh.
#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "davincirun/restart_policy.hpp"
#include "peers/peer_agent.hpp"
#include "peers/peer_connection.hpp"

namespace davincirun::detail {

using Clock = std::chrono::steady_clock;

void PeerAgent::member_say_over() {
  if (told_done_) return;
  for (auto& c : connections_) {
    if (c->closed || c->state != Connection::State::joined) continue;
    // Without restarts the hub needs to hear only of success (a failure
    // has stopped the job already), and of a part it waits for.
    if (restarts() || (local_over_.success && !stopping_) || config_.sends_part) {
      send_part(*c);
      send(*c, PeerFrame::over, encode_over(local_over_));
    }
    told_done_ = true;
  }
}

std::string PeerAgent::stopped_decision(const PeerEvent& event) {
  return fmt::format("not restarted: server {} was stopped ({})", event.server_id, event.detail);
}

// This server was stopped after its attempt was over, while the job decides
// (a job that restarts): the job does not restart.
void PeerAgent::late_stop(const PeerEvent& event) {
  if (config_.hub) {
    member_refusal_.at(config_.server_index) = stopped_decision(event);
    hub_decide(true);
    return;
  }
  for (auto& c : connections_) {
    if (c->closed || c->state != Connection::State::joined) continue;
    send(*c, PeerFrame::event, encode_event(event));
    report_delivered_ = true;
  }
}

// Server `i`'s end of this attempt as heard (this server's own for the hub), or null.
const PeerAttemptOver* PeerAgent::over_of(std::uint32_t i) const {
  if (i == config_.server_index) return &local_over_;
  const std::optional<PeerAttemptOver>& over = member_over_.at(i);
  return over.has_value() ? &over.value() : nullptr;
}

// Why server `i` rules a restart of this attempt out, or nullopt.
std::optional<std::string> PeerAgent::refusal(std::uint32_t i) const {
  const std::string& id = config_.server_ids.at(i);
  if (!member_gone_[i].empty()) return std::nullopt;  // it may rejoin the next attempt
  if (!member_refusal_[i].empty()) return member_refusal_[i];
  const PeerAttemptOver* over = over_of(i);
  if (over == nullptr) {
    return fmt::format("not restarted: server {} had not joined the job when attempt {} ended", id, attempt_);
  }
  if (over->refuses_restart) return over->decision;
  return std::nullopt;
}

// The hub decides once its own attempt is over and it heard every member's
// (`now`: at once, with what it has: it is going away). The servers'
// refusals are weighed in order: the server of the job's first event,
// then this one, then the others by index; then the restarts left.
void PeerAgent::hub_decide(bool now) {
  if (!config_.hub || !restarts() || ended_ || !local_finished_) return;
  const auto t = Clock::now();
  bool success = local_over_.success && !stopping_;
  std::vector<std::uint32_t> order;
  for (std::uint32_t i = 0; i < member_over_.size(); ++i) {
    if (i == config_.server_index) continue;
    const bool heard = member_over_[i] || !member_gone_[i].empty();
    if (!heard && !now) {
      // Not heard yet: wait, unless it never joined and will not now.
      const bool hopeless = !member_joined_[i] && stopping_ && (lingered(t) || t - started_ >= config_.connect_timeout);
      if (!hopeless) return;
    }
    const PeerAttemptOver* over = over_of(i);
    success = success && over != nullptr && over->success;
    order.push_back(i);
  }
  PeerDecision d;
  d.attempt = attempt_;
  if (!success) {
    std::uint32_t first = config_.server_index;
    if (first_event_) {
      const auto at = std::find(config_.server_ids.begin(), config_.server_ids.end(), first_event_->server_id);
      if (at != config_.server_ids.end()) first = static_cast<std::uint32_t>(at - config_.server_ids.begin());
    }
    order.insert(order.begin(), config_.server_index);
    order.erase(std::remove(order.begin() + 1, order.end(), first), order.end());
    if (first != config_.server_index) order.insert(order.begin(), first);
    for (const std::uint32_t i : order) {
      const PeerAttemptOver* over = over_of(i);
      if (d.root_cause.empty() && over != nullptr) d.root_cause = over->root_cause;
      if (d.decision.empty()) d.decision = refusal(i).value_or(std::string());
    }
    const int attempt = static_cast<int>(attempt_);
    if (d.decision.empty()) {
      d.restart = attempt <= config_.max_restarts;
      d.decision = d.restart ? restarted_decision(attempt, config_.max_restarts)
                             : no_restarts_left_decision(config_.max_restarts);
    }
  }
  for (auto& c : connections_) {
    if (!c->closed && c->state == Connection::State::joined) send(*c, PeerFrame::decided, encode_decision(d));
  }
  decision_ = std::move(d);
  deliver_decision();
}

// A member whose hub was lost before it decided: the job cannot restart.
void PeerAgent::hub_gone(const std::string& why) {
  if (ended_ || decision_) return;
  if (config_.awaits_start && !attempt_to_start()) {
    not_starting(fmt::format("the agent of rank 0's server was lost ({})", why));
    return;
  }
  PeerDecision d;
  d.attempt = attempt_;
  d.decision = fmt::format("not restarted: the agent of rank 0's server was lost before it decided ({})", why);
  decision_ = std::move(d);
  deliver_decision();
}

// Once this server's attempt is over (the decision may come first: a hub
// that goes away decides at once).
void PeerAgent::deliver_decision() {
  if (!local_finished_) return;
  const std::optional<PeerDecision> taken = std::exchange(decision_, std::nullopt);
  if (!taken) return;
  const PeerDecision& d = *taken;
  if (leaving_) {
    ended_ = true;  // its launcher is gone: this server's own verdict stands, and it leaves
    return;
  }
  const std::optional<PeerEvent> unheard = unheard_ ? first_event_ : std::nullopt;
  if (d.restart) {
    next_attempt();
  } else {
    ended_ = true;
  }
  if (on_decision_) on_decision_(d, unheard);
}

// Everything an attempt knew is forgotten; the connections stay.
void PeerAgent::next_attempt() {
  ++attempt_;
  stopping_ = reported_ = local_finished_ = told_done_ = report_delivered_ = unheard_ = false;
  unsent_report_.reset();
  first_event_.reset();
  local_over_ = PeerAttemptOver{};
  std::fill(member_over_.begin(), member_over_.end(), std::nullopt);
  std::fill(member_refusal_.begin(), member_refusal_.end(), std::string());
  std::fill(member_gone_.begin(), member_gone_.end(), std::string());
  for (auto& c : connections_) {
    c->done = false;
    c->silent_ms = UINT64_MAX;
  }
  const std::lock_guard<std::mutex> lock(mutex_);
  pending_report_.reset();
  finished_.reset();
  stop_event_.reset();
}

// A member that awaits its start (PeerConfig::awaits_start), welcomed: it
// starts as the job's attempt, or, while the job decides, waits for the decision.
void PeerAgent::member_welcomed(const PeerWelcome& welcome) {
  if (!config_.awaits_start || attempt_to_start()) return;
  attempt_ = welcome.attempt;
  deciding_ = welcome.deciding;
  if (deciding_) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  start_at_ = attempt_;
}

void PeerAgent::decided_before_start(const PeerDecision& decision) {
  if (!decision.restart) {
    not_starting(fmt::format("the job ended before this server could join it ({})",
                             decision.decision.empty() ? "every server succeeded" : decision.decision));
    return;
  }
  attempt_ = decision.attempt + 1;
  deciding_ = false;
  const std::lock_guard<std::mutex> lock(mutex_);
  start_at_ = attempt_;
}

// An awaiting member that will not start: its run() ends.
void PeerAgent::not_starting(const std::string& why) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (start_at_) return;
    if (not_started_.empty()) not_started_ = why;
  }
  local_finished_ = true;
  ended_ = true;
}

}  // namespace davincirun::detail
