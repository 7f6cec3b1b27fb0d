// A peer agent's bytes in and out (peer_agent.hpp): the poll loop, reading
// and parsing frames, queueing and flushing what it sends, and closing a
// connection. What the frames mean is peer_agent.cpp and peer_roles.cpp.
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "davincirun/errors.hpp"
#include "peers/peer_agent.hpp"
#include "peers/peer_connection.hpp"
#include "peers/peer_socket.hpp"

namespace davincirun::detail {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// The loop wakes at least this often to check the clocks, so a loss is
// seen within peer_timeout plus this.
constexpr milliseconds tick_period{100};
// Output a peer does not read (it hangs, or its link is gone) is bounded:
// past this the peer counts as lost. Room for a record part and then some.
constexpr std::size_t max_unsent_bytes = max_record_part_bytes + (1u << 20);
// The hub names refused connections at most this often.
constexpr milliseconds refusal_line_period{30'000};

}  // namespace

void PeerAgent::send(Connection& c, PeerFrame type, const std::string& payload) {
  if (c.closed) return;
  c.unsent += c.seal.seal(type, payload);
  if (!flush_some(c.fd.get(), c.unsent)) {
    lost(c, fmt::format("the connection to {} broke", c.peer));
  } else if (c.unsent.size() > max_unsent_bytes) {
    lost(c, fmt::format("{} stopped reading its connection", c.peer));
  }
}

void PeerAgent::drop(Connection& c, const std::string& why) {
  if (c.closed) return;
  c.closed = true;
  c.fd.reset();
  if (!config_.hub && c.state != Connection::State::connecting && c.state != Connection::State::joined) {
    next_connect_ = std::max(next_connect_, Clock::now() + reconnect_delay_);
    reconnect_delay_ = std::min(reconnect_delay_ * 2, max_reconnect_delay);
  }
  if (why.empty()) return;
  // A stranger, or a server started twice, may knock again and again: its
  // refusal is said once, then at most every refusal_line_period with a count.
  const auto now = Clock::now();
  if (now - last_refusal_line_ < refusal_line_period) {
    ++refusals_unsaid_;
    return;
  }
  last_refusal_line_ = now;
  const std::size_t unsaid = std::exchange(refusals_unsaid_, 0);
  on_notice_(unsaid == 0 ? why : fmt::format("{} ({} more refused since the last line)", why, unsaid), false);
}

void PeerAgent::read_from(Connection& c) {
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(c.fd.get(), buf, sizeof buf);
    if (n > 0) {
      c.parser.feed(std::string_view(buf, static_cast<std::size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    // Frames read before the end still count (a member's "done" then EOF).
    while (auto f = c.parser.next()) {
      config_.hub ? hub_frame(c, *f) : member_frame(c, *f);
    }
    lost(c, n == 0 ? fmt::format("its agent at {} closed its connection (killed, or its host went down)", c.peer)
                   : fmt::format("the connection to {} broke: {}", c.peer, std::strerror(errno)));
    return;
  }
  while (!c.closed) {
    auto f = c.parser.next();
    if (!f) break;
    config_.hub ? hub_frame(c, *f) : member_frame(c, *f);
  }
}

void PeerAgent::flush_before_exit() {
  // What is queued (a stop, an "over") gets up to a second to leave; a
  // member's record part before its "over" up to the peer timeout: cut short,
  // the hub would take this server for lost before it said it was done.
  const auto deadline = Clock::now() + (!config_.hub && !local_part_.empty() && told_done_
                                            ? std::max(milliseconds(1000), config_.peer_timeout)
                                            : milliseconds(1000));
  for (auto& c : connections_) {
    while (!c->closed && !c->unsent.empty() && Clock::now() < deadline) {
      pollfd p{c->fd.get(), POLLOUT, 0};
      if (::poll(&p, 1, 100) > 0 && !flush_some(c->fd.get(), c->unsent)) break;
    }
  }
}

void PeerAgent::poll_once() {
  std::vector<pollfd> fds;
  fds.push_back({wake_fd_.get(), POLLIN, 0});
  if (listen_fd_) fds.push_back({listen_fd_.get(), POLLIN, 0});
  const std::size_t first = fds.size();
  for (const auto& c : connections_) {
    short events = POLLIN;
    if (c->state == Connection::State::connecting || !c->unsent.empty()) events |= POLLOUT;
    fds.push_back({c->closed ? -1 : c->fd.get(), events, 0});
  }
  if (::poll(fds.data(), fds.size(), static_cast<int>(tick_period.count())) < 0 && errno != EINTR) {
    throw SystemError("poll", errno);
  }
  if (listen_fd_ && fds[1].revents != 0) hub_accept();
  for (std::size_t i = 0; i < connections_.size() && first + i < fds.size(); ++i) {
    Connection& c = *connections_[i];
    const short revents = fds[first + i].revents;
    if (c.closed || revents == 0) continue;
    try {
      if (c.state == Connection::State::connecting) {
        std::string error;
        if (!connect_finished(c.fd.get(), error)) {
          last_connect_error_ = error;
          drop(c, "");
          continue;
        }
        c.state = Connection::State::handshake;
        c.opened = Clock::now();
      }
      if ((revents & POLLOUT) != 0 && !flush_some(c.fd.get(), c.unsent)) {
        lost(c, fmt::format("the connection to {} broke", c.peer));
        continue;
      }
      if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) read_from(c);
    } catch (const PeerProtocolError& e) {
      if (c.state == Connection::State::joined) {
        lost(c, fmt::format("the agent at {} sent a bad message: {}", c.peer, e.what()));
      } else {
        last_connect_error_ = e.what();
        drop(c, config_.hub ? fmt::format("refused a connection from {}: {}", c.peer, e.what()) : "");
      }
    }
  }
}

}  // namespace davincirun::detail
