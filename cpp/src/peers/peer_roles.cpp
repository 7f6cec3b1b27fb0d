// The two roles of a peer agent (peer_agent.hpp): the hub, on the server of
// rank 0, accepts members and checks who they are; a member connects to
// the hub and answers its challenge.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "peers/peer_agent.hpp"
#include "peers/peer_connection.hpp"
#include "peers/peer_socket.hpp"

namespace davincirun::detail {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

void PeerAgent::hub_accept() {
  for (;;) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    UniqueFd fd(::accept4(listen_fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd) return;  // EAGAIN, or a connection that went away before we took it
    tune_socket(fd.get());
    auto c = std::make_unique<Connection>(std::move(fd), config_.job_key, 'H', address_text(addr));
    c->hub_nonce = random_nonce();
    send(*c, PeerFrame::challenge, c->hub_nonce);
    watch(*c);  // (the challenge may have gone whole, or broken it: watch() knows)
    connections_.push_back(std::move(c));
  }
}

void PeerAgent::hub_frame(Connection& c, const RawPeerFrame& f) {
  if (c.state == Connection::State::handshake) {
    if (f.type != PeerFrame::hello) throw PeerProtocolError("expected a hello first");
    const PeerHello hello = decode_hello(f.payload);
    c.seal.rekey(peer_session_key(config_.job_key, c.hub_nonce, hello.nonce));
    c.seal.open(f);
    const std::uint32_t i = hello.server_index;
    if (i >= config_.server_ids.size() || i == config_.server_index || config_.server_ids[i] != hello.server_id) {
      throw PeerProtocolError(
          fmt::format("it says it is server {} (index {}), which this job's table does not have", hello.server_id, i));
    }
    if (member_joined_[i]) {
      // The same server started twice (two pods, two copies of a job):
      // authenticated, so it is told why, and gives up instead of retrying.
      const std::string why = fmt::format("server {} has joined already", hello.server_id);
      send(c, PeerFrame::refused, encode_refusal({why}));
      throw PeerProtocolError(why);
    }
    member_joined_[i] = true;
    member_sends_part_[i] = hello.sends_part;
    member_left_[i].clear();
    const bool rejoined = member_lost_at_[i].has_value();
    member_lost_at_[i].reset();
    c.server_index = i;
    c.state = Connection::State::joined;
    c.last_heard = Clock::now();
    c.joined_at = c.last_heard;
    send(c, PeerFrame::welcome, encode_welcome({attempt_, stopping_}));
    send_heartbeat(c, true);  // its echo gives the first clock sample (peer_clock.hpp)
    // Joined while the job decides on an attempt it did not run: it waits
    // for the decision, and counts as heard (nothing of its own to refuse).
    if (restarts() && stopping_ && !member_over_[i]) {
      PeerAttemptOver none;
      none.attempt = attempt_;
      member_over_[i] = none;
    }
    if (rejoined) on_notice_(fmt::format("server {} rejoined the job (attempt {})", hello.server_id, attempt_), false);
    if (std::count(member_joined_.begin(), member_joined_.end(), true) + 1 ==
        static_cast<std::ptrdiff_t>(member_joined_.size())) {
      on_notice_(fmt::format("the agents of all {} servers are connected ({} after start)", member_joined_.size(),
                             seconds_text(std::chrono::duration_cast<milliseconds>(Clock::now() - started_))),
                 true);
    }
    // A member that joins after the job began to stop learns it at once
    // (in a job that restarts, its welcome said so, and it starts nothing).
    if (stopping_ && first_event_ && !restarts()) send(c, PeerFrame::event, encode_event(*first_event_));
    return;
  }
  c.seal.open(f);
  c.last_heard = Clock::now();
  switch (f.type) {
    case PeerFrame::heartbeat: heard_heartbeat(c, decode_heartbeat(f.payload)); break;
    case PeerFrame::part: hub_part_chunk(c, decode_part_chunk(f.payload)); break;
    case PeerFrame::event: {
      const PeerEvent event = decode_event(f.payload);
      // Stopped there (a person, a signal, its timeout): no restart.
      if (restarts() && event.kind == PeerEventKind::stopped && !ended_) {
        member_refusal_.at(c.server_index) = stopped_decision(event);
      }
      // Its launcher is gone: it leaves the job, which may go on when it rejoins.
      if (restarts() && event.kind == PeerEventKind::lost && !ended_) {
        member_gone_.at(c.server_index) = event.detail;
        c.leaving = true;
      }
      stop_job(event, false, &c);
      hub_decide(false);
      break;
    }
    case PeerFrame::over: {
      PeerAttemptOver over = decode_over(f.payload);
      if (over.attempt != attempt_) {
        throw PeerProtocolError(
            fmt::format("it says attempt {} is over; the job is at attempt {}", over.attempt, attempt_));
      }
      if (!restarts()) c.done = true;  // in a job that restarts, it is needed until the job ends
      member_over_.at(c.server_index) = std::move(over);
      hub_decide(false);
      break;
    }
    default: throw PeerProtocolError("unexpected frame from a member");
  }
}

void PeerAgent::member_connect() {
  std::string error;
  UniqueFd fd = connect_to(config_.hub_address, config_.port, error);
  next_connect_ = Clock::now() + first_reconnect_delay;  // while nobody listens: soon again
  if (!fd) {
    last_connect_error_ = error;
    return;
  }
  auto c = std::make_unique<Connection>(std::move(fd), config_.job_key, 'M',
                                        fmt::format("{}:{}", config_.hub_address, config_.port));
  c->state = Connection::State::connecting;
  watch(*c);
  connections_.push_back(std::move(c));
}

void PeerAgent::member_frame(Connection& c, const RawPeerFrame& f) {
  c.seal.open(f);
  c.last_heard = Clock::now();
  if (c.state == Connection::State::handshake) {
    if (f.type != PeerFrame::challenge || f.payload.size() != peer_nonce_bytes) {
      throw PeerProtocolError("expected a challenge first");
    }
    PeerHello hello;
    hello.nonce = random_nonce();
    hello.server_index = config_.server_index;
    hello.server_id = config_.server_ids.at(config_.server_index);
    hello.pid = static_cast<std::uint32_t>(::getpid());
    hello.sends_part = config_.sends_part;
    c.seal.rekey(peer_session_key(config_.job_key, f.payload, hello.nonce));
    send(c, PeerFrame::hello, encode_hello(hello));
    c.state = Connection::State::welcoming;
    return;
  }
  if (c.state == Connection::State::welcoming) {
    if (f.type == PeerFrame::refused) {
      // A final answer: trying again would be refused again.
      PeerEvent event;
      event.kind = PeerEventKind::unreachable;
      event.server_id = config_.server_ids.at(config_.hub_index);
      event.detail =
          fmt::format("refused this server: {} (is the same server started twice?)", decode_refusal(f.payload).reason);
      drop(c, "");
      if (config_.awaits_start) not_starting(fmt::format("server {} (rank 0's) {}", event.server_id, event.detail));
      stop_job(event, false, nullptr);
      return;
    }
    if (f.type != PeerFrame::welcome) throw PeerProtocolError("expected a welcome");
    member_welcomed(decode_welcome(f.payload));
    c.state = Connection::State::joined;
    c.joined_at = Clock::now();
    joined_ = true;
    reconnect_delay_ = first_reconnect_delay;
    next_heartbeat_ = Clock::now();  // the hub hears this server's silence at once
    on_notice_(fmt::format("joined the agents of the job at {}, the server of rank 0 ({} after start)", c.peer,
                           seconds_text(std::chrono::duration_cast<milliseconds>(Clock::now() - started_))),
               true);
    // What happened here before the channel was up goes out now.
    if (unsent_report_) {
      send(c, PeerFrame::event, encode_event(*unsent_report_));
      report_delivered_ = true;
    }
    if (local_finished_) member_say_over();
    return;
  }
  switch (f.type) {
    case PeerFrame::heartbeat: heard_heartbeat(c, decode_heartbeat(f.payload)); break;
    case PeerFrame::event: stop_job(decode_event(f.payload), false, &c); break;
    case PeerFrame::decided: {
      PeerDecision decision = decode_decision(f.payload);
      if (!restarts() || decision.attempt != attempt_ || decision_) {
        throw PeerProtocolError(fmt::format("a decision on attempt {} was not expected (this server is at attempt {})",
                                            decision.attempt, attempt_));
      }
      if (config_.awaits_start && !attempt_to_start()) {
        decided_before_start(decision);
        break;
      }
      decision_ = std::move(decision);
      deliver_decision();
      break;
    }
    default: throw PeerProtocolError("unexpected frame from the hub");
  }
}

}  // namespace davincirun::detail
