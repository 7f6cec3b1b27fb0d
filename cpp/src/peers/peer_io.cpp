// A peer agent's bytes in and out (peer_agent.hpp): the epoll loop, reading
// and parsing frames, queueing and flushing what it sends, and closing a
// connection. What the frames mean is peer_agent.cpp and peer_roles.cpp.
#include <poll.h>
#include <sys/epoll.h>
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
  } else {
    watch(c);
  }
}

void PeerAgent::watch(Connection& c) {
  if (c.closed) return;  // its descriptor closed, which took it out of poll_fd_
  const std::uint32_t events =
      EPOLLIN | (c.state == Connection::State::connecting || !c.unsent.empty() ? EPOLLOUT : 0u);
  if (events == c.watched) return;
  epoll_event e{};
  e.events = events;
  e.data.ptr = &c;  // stable: connections_ holds unique_ptrs, erased only in tick()
  if (::epoll_ctl(poll_fd_.get(), c.watched == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, c.fd.get(), &e) != 0) {
    // (ENOMEM, or fs.epoll.max_user_watches reached: a connection unwatched would never be heard.)
    lost(c, fmt::format("cannot watch the connection to {}: {}", c.peer, std::strerror(errno)));
    return;
  }
  c.watched = events;
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

void PeerAgent::poll_once(milliseconds timeout) {
  // Level-triggered: what is not taken from this batch is reported again.
  constexpr int batch = 256;
  epoll_event ready[batch];
  const int n =
      ::epoll_wait(poll_fd_.get(), ready, batch, static_cast<int>(std::max(timeout, milliseconds(0)).count()));
  if (n < 0 && errno != EINTR) throw SystemError("epoll_wait", errno);
  for (int i = 0; i < n; ++i) {
    if (ready[i].data.ptr == nullptr) continue;  // the wake: take_commands() reads it
    if (ready[i].data.ptr == &listen_fd_) {
      hub_accept();
      continue;
    }
    // Closed by an earlier one of this batch (lost, dropped): still held
    // until tick(), so the pointer is good and `closed` says to skip it.
    Connection& c = *static_cast<Connection*>(ready[i].data.ptr);
    const std::uint32_t revents = ready[i].events;
    if (c.closed) continue;
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
      if ((revents & EPOLLOUT) != 0 && !flush_some(c.fd.get(), c.unsent)) {
        lost(c, fmt::format("the connection to {} broke", c.peer));
        continue;
      }
      if ((revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0) read_from(c);
      watch(c);
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
