#include "peers/peer_agent.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "common/text.hpp"
#include "davincirun/errors.hpp"
#include "peers/peer_connection.hpp"
#include "peers/peer_socket.hpp"

namespace davincirun::detail {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::chrono::milliseconds heartbeat_interval_for(std::chrono::milliseconds peer_timeout) noexcept {
  return std::clamp(peer_timeout / 6, milliseconds(50), milliseconds(5'000));
}

namespace {

// tick() runs at most this often (see run()); well under the shortest heartbeat interval.
constexpr milliseconds min_tick_gap{10};
// A stranger that connects and says nothing is dropped after this.
constexpr milliseconds handshake_timeout{10'000};
// Servers still joining are named: first after this, then every join_line_period.
constexpr milliseconds first_join_line{5'000};
constexpr milliseconds join_line_period{30'000};
// After a stop, an agent goes on telling the servers not there yet for at
// most this long: enough for one already starting to connect, short enough
// that a stop ends the job within a second. Those that come later find the
// job gone (never joined, or the hub not reached) at their wait timeout.
constexpr milliseconds stop_linger{1'000};

}  // namespace

PeerAgent::PeerAgent(PeerConfig config, StopHandler on_stop, NoticeHandler on_notice, SilenceProbe silence)
    : config_(std::move(config)),
      on_stop_(std::move(on_stop)),
      on_notice_(std::move(on_notice)),
      silence_(std::move(silence)),
      started_(Clock::now()),
      next_heartbeat_(Clock::now()),
      next_connect_(Clock::now()),
      next_join_line_(Clock::now() + first_join_line) {
  wake_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_fd_) throw SystemError("eventfd", errno);
  poll_fd_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!poll_fd_) throw SystemError("epoll_create1", errno);
  epoll_event wake_event{};
  wake_event.events = EPOLLIN;  // data.ptr null: the wake, read by take_commands()
  if (::epoll_ctl(poll_fd_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &wake_event) != 0) {
    throw SystemError("epoll_ctl", errno);
  }
  member_joined_.assign(config_.server_ids.size(), false);
  member_over_.assign(config_.server_ids.size(), std::nullopt);
  member_gone_.assign(config_.server_ids.size(), std::string());
  member_refusal_.assign(config_.server_ids.size(), std::string());
  member_lost_at_.assign(config_.server_ids.size(), std::nullopt);
  member_part_.assign(config_.server_ids.size(), std::string());
  member_clock_.assign(config_.server_ids.size(), std::nullopt);
  member_sends_part_.assign(config_.server_ids.size(), false);
  member_left_.assign(config_.server_ids.size(), std::string());
  member_pace_.assign(config_.server_ids.size(), std::nullopt);
  member_slow_.assign(config_.server_ids.size(), {});
  if (config_.hub && config_.server_ids.size() > 1) {
    listen_fd_ = listen_on(config_.hub_address, config_.port);
    epoll_event listen_event{};
    listen_event.events = EPOLLIN;
    listen_event.data.ptr = &listen_fd_;
    if (::epoll_ctl(poll_fd_.get(), EPOLL_CTL_ADD, listen_fd_.get(), &listen_event) != 0) {
      throw SystemError("epoll_ctl", errno);
    }
  }
  update_waiting_for();
}

PeerAgent::~PeerAgent() = default;

std::string PeerAgent::server_name(std::uint32_t index) const {
  return index < config_.server_ids.size() ? "server " + config_.server_ids[index] : "an unknown server";
}

void PeerAgent::wake() {
  const std::uint64_t one = 1;
  const ssize_t ignored = ::write(wake_fd_.get(), &one, sizeof one);
  (void)ignored;
}

void PeerAgent::report(const PeerEvent& event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!pending_report_) pending_report_ = event;
  }
  wake();
}

void PeerAgent::finish(PeerAttemptOver over, std::string part) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = std::move(over);
    finished_part_ = std::move(part);
  }
  wake();
}

void PeerAgent::abort() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
  }
  wake();
}

std::optional<PeerEvent> PeerAgent::stop_event() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stop_event_;
}

std::optional<std::uint32_t> PeerAgent::attempt_to_start() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return start_at_;
}

std::string PeerAgent::why_not_started() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return not_started_;
}

std::string PeerAgent::waiting_for() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return waiting_for_;
}

void PeerAgent::take_commands() {
  std::uint64_t count = 0;
  const ssize_t ignored = ::read(wake_fd_.get(), &count, sizeof count);
  (void)ignored;
  std::optional<PeerEvent> report;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pending_report_ && !reported_) report = pending_report_;
    if (finished_ && !local_finished_) {
      local_finished_ = true;
      local_over_ = *finished_;
      local_over_.attempt = attempt_;
      local_part_ = std::exchange(finished_part_, std::string());
    }
  }
  if (report) {
    reported_ = true;
    unsent_report_ = *report;
    leaving_ = report->kind == PeerEventKind::lost;  // its launcher is gone: it will not restart
    if (restarts() && stopping_ && local_finished_) {
      late_stop(*report);
    } else {
      stop_job(*report, true, nullptr);
    }
  }
  if (local_finished_ && !config_.hub) member_say_over();
  config_.hub ? hub_decide(false) : deliver_decision();
}

void PeerAgent::lost(Connection& c, const std::string& why) {
  if (c.closed) return;
  const bool joined = c.state == Connection::State::joined;
  // A server waiting for the others (local_finished_) still counts them: a
  // member lost then would otherwise be waited for until the end of time.
  const bool quiet = c.done || c.leaving || stopping_ || !joined || ended_;
  if (config_.hub && joined && !c.done && c.server_index < member_left_.size()) member_left_[c.server_index] = why;
  drop(c, "");
  if (!quiet) stop_job(lost_event(c, why), false, &c);
  // In a job that restarts, a member lost may rejoin (within the wait
  // timeout); without its hub, a member's job ends.
  if (joined && restarts() && !ended_) {
    if (config_.hub) {
      const std::uint32_t i = c.server_index;
      // (One that said it leaves was gone from the attempt it said so in.)
      if (member_gone_.at(i).empty() && !c.leaving) member_gone_[i] = why;
      member_joined_.at(i) = false;
      member_lost_at_.at(i) = Clock::now();
      hub_decide(false);
    } else {
      hub_gone(why);
    }
  }
}

PeerEvent PeerAgent::lost_event(const Connection& c, const std::string& why) const {
  PeerEvent event;
  event.kind = PeerEventKind::lost;
  // The hub names the member; a member names the hub by the address it dialled.
  event.server_id = config_.server_ids.at(config_.hub ? c.server_index : config_.hub_index);
  event.detail = fmt::format("was lost {} after the agents met: {}",
                             seconds_text(std::chrono::duration_cast<milliseconds>(Clock::now() - c.joined_at)), why);
  return event;
}

void PeerAgent::stop_job(const PeerEvent& event, bool local, Connection* origin) {
  if (stopping_) return;
  stopping_ = true;
  stopped_at_ = Clock::now();
  first_event_ = event;
  // The hub tells every member but the one it heard it from (and those
  // that join later, on joining); a member tells the hub what happened on
  // its own server only.
  if (config_.hub || local) {
    for (auto& c : connections_) {
      if (c.get() != origin && !c->closed && c->state == Connection::State::joined) {
        send(*c, PeerFrame::event, encode_event(event));
        if (!config_.hub) report_delivered_ = true;
      }
    }
  }
  if (local) return;  // the owner is stopping already
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_event_ = event;
  }
  if (restarts() && local_finished_) {
    unheard_ = true;  // nothing runs here to stop: the job's decision carries it
    return;
  }
  on_stop_(event);
}

void PeerAgent::tick() {
  const auto now = Clock::now();
  if (!config_.hub) retry_join(now);
  send_heartbeats(now);
  check_connections(now);
  if (config_.hub) {
    check_never_joined(now);
    check_stall();
    hub_decide(false);  // a member not joined may be given up on now
  }
  say_not_joined(now);
  connections_.erase(std::remove_if(connections_.begin(), connections_.end(), [](const auto& c) { return c->closed; }),
                     connections_.end());
  update_waiting_for();
}

// A member keeps trying to join while it has something to tell: a failure
// at start-up must reach the other servers, not wait them out.
void PeerAgent::retry_join(Clock::time_point now) {
  if (joined_ || (stopping_ && !(reported_ && !report_delivered_ && !lingered(now)))) return;
  if (now - started_ >= config_.connect_timeout) {
    for (auto& c : connections_) drop(*c, "");
    if (stopping_) {
      report_delivered_ = true;  // nobody to tell: give up
      return;
    }
    PeerEvent event;
    event.kind = PeerEventKind::unreachable;
    event.server_id = config_.server_ids.at(config_.hub_index);
    event.detail = fmt::format("could not be reached: its agent at {}:{} did not answer within {}{}",
                               config_.hub_address, config_.port, seconds_text(config_.connect_timeout),
                               last_connect_error_.empty() ? "" : " (" + last_connect_error_ + ")");
    if (config_.awaits_start) not_starting(fmt::format("server {} (rank 0's) {}", event.server_id, event.detail));
    stop_job(event, false, nullptr);
    return;
  }
  const bool open = std::any_of(connections_.begin(), connections_.end(), [](const auto& c) { return !c->closed; });
  if (!open && now >= next_connect_) member_connect();
}

void PeerAgent::send_heartbeats(Clock::time_point now) {
  if (now < next_heartbeat_) return;
  next_heartbeat_ = now + config_.heartbeat_interval;
  if (config_.hub) hub_update_pace();
  for (auto& c : connections_) {
    if (c->closed || c->state != Connection::State::joined) continue;
    send_heartbeat(*c, config_.hub && !member_clock_.at(c->server_index));
  }
}

void PeerAgent::check_connections(Clock::time_point now) {
  for (auto& c : connections_) {
    if (c->closed) continue;
    const auto quiet = std::chrono::duration_cast<milliseconds>(now - c->last_heard);
    if (c->state == Connection::State::joined && quiet > config_.peer_timeout) {
      lost(*c, fmt::format("no heartbeat from its agent at {} for {} (its host is down, or the link is cut)", c->peer,
                           seconds_text(quiet)));
    } else if (c->state != Connection::State::joined && now - c->opened > handshake_timeout) {
      last_connect_error_ = "no answer to the handshake";
      drop(*c, config_.hub ? fmt::format("dropped a connection from {}: it did not say who it is", c->peer) : "");
    }
  }
}

void PeerAgent::check_never_joined(Clock::time_point now) {
  if (stopping_) return;
  for (std::uint32_t i = 0; i < member_joined_.size(); ++i) {
    if (i == config_.server_index || member_joined_[i]) continue;
    // A member lost in a job that restarts has the wait timeout to rejoin.
    if (now - member_lost_at_[i].value_or(started_) < config_.connect_timeout) continue;
    PeerEvent event;
    event.kind = PeerEventKind::never_joined;
    event.server_id = config_.server_ids[i];
    event.detail =
        member_lost_at_[i]
            ? fmt::format("did not rejoin the job within {} after it was lost", seconds_text(config_.connect_timeout))
            : fmt::format("never joined: its agent did not connect within {}", seconds_text(config_.connect_timeout));
    stop_job(event, false, nullptr);
    return;
  }
}

// The job is silent when every server still running is: the least silence
// of them all, each member's as its last heartbeat said (never
// extrapolated: output since then would make that a false alarm). Once the
// hub's own ranks are done, only the members still running count.
void PeerAgent::check_stall() {
  if (stopping_ || config_.stall_timeout.count() <= 0 || !silence_) return;
  for (std::uint32_t i = 0; i < member_joined_.size(); ++i) {
    if (i != config_.server_index && !member_joined_[i]) return;  // not everyone is here to say
  }
  std::uint64_t silent = local_finished_ ? UINT64_MAX : silence_();
  for (const auto& c : connections_) {
    if (c->closed || c->done || c->state != Connection::State::joined) continue;
    silent = std::min(silent, c->silent_ms == UINT64_MAX ? 0 : c->silent_ms);
  }
  if (silent == UINT64_MAX || silent < static_cast<std::uint64_t>(config_.stall_timeout.count())) return;
  PeerEvent event;
  event.kind = PeerEventKind::stalled;
  event.server_id = config_.server_ids.at(config_.server_index);
  event.detail = fmt::format("no rank of the job wrote any output for {}",
                             seconds_text(milliseconds(static_cast<std::int64_t>(silent))));
  stop_job(event, false, nullptr);
}

// While the job runs, servers not joined yet are named, by the hub and by
// a member: a wrong MASTER_ADDR, or a server that never came up, is seen
// long before the wait timeout.
void PeerAgent::say_not_joined(Clock::time_point now) {
  if (stopping_ || local_finished_ || now < next_join_line_) return;
  const bool missing = config_.hub ? std::count(member_joined_.begin(), member_joined_.end(), false) > 1 : !joined_;
  if (!missing) return;
  next_join_line_ = now + join_line_period;
  on_notice_(fmt::format("not joined yet: {}; waited {} of {}", waiting_for(),
                         seconds_text(std::chrono::duration_cast<milliseconds>(now - started_)),
                         seconds_text(config_.connect_timeout)),
             true);
}

void PeerAgent::update_waiting_for() {
  // After a stop, the agents wait a while (lingered()) only to tell it to
  // those not there yet; before, until the wait timeout.
  const std::string limit = stopping_
                                ? fmt::format("to tell it of the stop, for at most {} after it",
                                              seconds_text(std::min(stop_linger, config_.connect_timeout)))
                                : fmt::format("giving up {} after the start", seconds_text(config_.connect_timeout));
  std::string text;
  if (!config_.hub) {
    text = fmt::format("the agent of rank 0's server at {}:{}", config_.hub_address, config_.port);
    if (!joined_) {
      text += fmt::format(" (not reached{}; {})", last_connect_error_.empty() ? "" : ": " + last_connect_error_, limit);
    }
  } else {
    // Only the first few are named: this runs on every tick, and a hub of
    // thousands of members must not format each of them every time.
    constexpr std::size_t shown = 8;
    std::string named;
    std::size_t waiting = 0;
    bool unjoined = false;
    for (std::uint32_t i = 0; i < member_joined_.size(); ++i) {
      if (i == config_.server_index || member_over_[i]) continue;
      unjoined = unjoined || !member_joined_[i];
      if (waiting++ < shown) {
        named += fmt::format("{}{} ({})", waiting > 1 ? ", " : "", config_.server_ids[i],
                             member_joined_[i] ? "running" : "not joined");
      }
    }
    text = (waiting == 1 ? "server " : "servers ") + named;
    if (waiting > shown) text += fmt::format(" and {} more", waiting - shown);
    if (waiting == 0) text = "the other servers";
    if (unjoined) text += fmt::format(" ({})", limit);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  waiting_for_ = std::move(text);
}

bool PeerAgent::done() const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_) return true;
  }
  if (!local_finished_) return false;
  const auto now = Clock::now();
  if (!config_.hub) {
    if (restarts() && joined_) return ended_ || (leaving_ && told_done_);  // the hub's decision, or the hub lost
    if (told_done_) return true;
    // This server's own event must reach the hub (or the wait be over).
    return stopping_ && (!reported_ || report_delivered_ || lingered(now));
  }
  if (restarts() && !ended_) return false;
  if (stopping_) {
    if (awaiting_parts(now)) return false;
    // Members that have not joined yet learn the event on joining: wait a
    // while for them, so that a failure at start-up stops them at once.
    for (std::uint32_t i = 0; i < member_joined_.size(); ++i) {
      // (Not past the connect timeout: by then they never will.)
      if (i != config_.server_index && !member_joined_[i] && !lingered(now) &&
          now - started_ < config_.connect_timeout) {
        return false;
      }
    }
    return true;
  }
  for (std::uint32_t i = 0; i < member_over_.size(); ++i) {
    if (i != config_.server_index && !member_over_[i]) return false;
  }
  return true;
}

bool PeerAgent::lingered(std::chrono::steady_clock::time_point now) const {
  return now - stopped_at_ >= std::min(stop_linger, config_.connect_timeout);
}

void PeerAgent::run() {
  // The clocks' checks walk every connection: after a wake, unless one ran
  // within min_tick_gap (a hub of thousands hears a heartbeat every few ms).
  auto next_tick = Clock::now();
  bool tick_owed = false;
  while (!done()) {
    take_commands();
    if (done()) break;
    poll_once(tick_owed ? std::chrono::ceil<milliseconds>(next_tick - Clock::now()) : tick_period);
    const auto now = Clock::now();
    tick_owed = now < next_tick;
    if (!tick_owed) {
      tick();
      next_tick = now + min_tick_gap;
    }
  }
  take_commands();  // a report given just before abort() still goes out
  flush_before_exit();
}

}  // namespace davincirun::detail
