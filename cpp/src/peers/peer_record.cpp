// What the peer channel carries for the job record (record/job_record.hpp):
// heartbeats with wall-clock times, from which the hub measures each
// member's clock (peer_clock.hpp), and each member's part of the record,
// in pieces before its `over`, which the hub keeps for the job's end; and
// at the end, the hub's joined record back to every member, so that each
// server's run directory holds the whole job's.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include <fmt/format.h>

#include "peers/peer_agent.hpp"
#include "peers/peer_connection.hpp"
#include "peers/peer_socket.hpp"

namespace davincirun::detail {

using Clock = std::chrono::steady_clock;

void PeerAgent::send_heartbeat(Connection& c, bool want_echo) {
  PeerHeartbeat beat;
  beat.silent_ms = silence_ ? silence_() : 0;
  beat.sent_us = wall_clock_us();
  if (c.heard_sent_us != 0) {
    beat.echo_us = c.heard_sent_us;
    beat.held_us = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - c.heard_beat_at).count());
  }
  beat.want_echo = want_echo;
  put_pace(beat);
  send(c, PeerFrame::heartbeat, encode_heartbeat(beat));
}

void PeerAgent::heard_heartbeat(Connection& c, const PeerHeartbeat& beat) {
  const std::uint64_t received = wall_clock_us();
  c.heard_sent_us = beat.sent_us;
  c.heard_beat_at = Clock::now();
  heard_pace(c, beat);
  if (!config_.hub) {
    if (beat.want_echo) send_heartbeat(c, false);  // the hub times the round trip
    return;
  }
  c.silent_ms = beat.silent_ms;
  if (const auto sample = clock_sample(beat, received)) keep_best(member_clock_.at(c.server_index), *sample);
}

// A member's part goes in pieces just before its over, on the same
// connection: the hub has the whole part when it hears the over.
void PeerAgent::send_part(Connection& c) {
  // (The owner keeps its part within the bound: past it the hub would refuse the connection.)
  if (local_part_.empty() || local_part_.size() > max_record_part_bytes) return;
  PeerPartChunk chunk;
  chunk.attempt = attempt_;
  for (std::size_t at = 0; at < local_part_.size() && !c.closed; at += max_part_chunk_bytes) {
    chunk.bytes = local_part_.substr(at, max_part_chunk_bytes);
    chunk.last = at + max_part_chunk_bytes >= local_part_.size();
    send(c, PeerFrame::part, encode_part_chunk(chunk));
  }
}

void PeerAgent::hub_part_chunk(Connection& c, const PeerPartChunk& chunk) {
  if (c.part.size() + chunk.bytes.size() > max_record_part_bytes) {
    throw PeerProtocolError(fmt::format("its part of the job record is over {} bytes", max_record_part_bytes));
  }
  c.part += chunk.bytes;
  // A job that restarts sends one with every attempt: the last one counts.
  if (chunk.last) member_part_.at(c.server_index) = std::exchange(c.part, std::string());
}

// After a stop, members that send a part send it once their ranks have
// ended: the hub waits for them (not for those gone), for a while.
bool PeerAgent::awaiting_parts(Clock::time_point now) const {
  if (now - stopped_at_ >= config_.gather_timeout) return false;
  for (std::uint32_t i = 0; i < member_joined_.size(); ++i) {
    if (i == config_.server_index || !member_joined_[i] || !member_sends_part_[i]) continue;
    if (!member_over_[i] && member_left_[i].empty()) return true;
  }
  return false;
}

std::vector<GatheredServer> PeerAgent::gathered() const {
  std::vector<GatheredServer> servers;
  if (!config_.hub) return servers;
  for (std::uint32_t i = 0; i < config_.server_ids.size(); ++i) {
    if (i == config_.server_index) continue;
    GatheredServer s;
    s.server_index = i;
    s.part = member_part_[i];
    s.clock = member_clock_[i];
    if (s.part.empty()) {
      s.why = !member_left_[i].empty() ? "was lost: " + member_left_[i]
              : !member_joined_[i]     ? "never joined the job"
              : !member_sends_part_[i] ? "its agent sends none"
                                       : "its part did not arrive before the job ended";
    }
    servers.push_back(std::move(s));
  }
  return servers;
}

namespace {

std::chrono::milliseconds left_until(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

// What a member sent after the hub's loop ended (nothing is expected) is read and left.
void discard_input(int fd) {
  char buf[4096];
  while (::recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {}
}

}  // namespace

// The run() loop is over: what is sent and read here goes straight to the
// sockets, and a connection that breaks is only closed (the job has ended:
// nothing is stopped or reported any more).
std::size_t PeerAgent::share_record(const std::string& record, std::chrono::milliseconds timeout) {
  if (!config_.hub) return 0;
  std::vector<Connection*> to;
  for (auto& c : connections_) {
    const std::uint32_t i = c->server_index;
    if (c->closed || c->state != Connection::State::joined || i >= member_sends_part_.size()) continue;
    if (member_sends_part_[i] && member_over_[i]) to.push_back(c.get());
  }
  const bool whole = !record.empty() && record.size() * to.size() <= max_shared_record_bytes;
  // The same pieces for every member, each hashed once (the tags cover the
  // payload's hash); an empty last piece alone says none comes.
  std::vector<std::pair<std::string, Digest>> pieces;
  PeerPartChunk chunk;
  chunk.attempt = attempt_;
  chunk.last = true;
  for (std::size_t at = 0; whole && at < record.size(); at += max_part_chunk_bytes) {
    chunk.bytes = record.substr(at, max_part_chunk_bytes);
    chunk.last = at + max_part_chunk_bytes >= record.size();
    pieces.emplace_back(encode_part_chunk(chunk), Digest{});
  }
  if (!whole) pieces.emplace_back(encode_part_chunk(chunk), Digest{});
  for (auto& [payload, digest] : pieces) digest = sha256(payload);
  for (Connection* c : to) {
    for (const auto& [payload, digest] : pieces) c->unsent += c->seal.seal(PeerFrame::record, payload, digest);
  }
  const auto deadline = Clock::now() + timeout;
  std::size_t got = 0;
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Connection*> busy;
    for (Connection* c : to) {
      if (c->closed) continue;
      if (!flush_some(c->fd.get(), c->unsent)) {
        drop(*c, "");
      } else if (c->unsent.empty()) {
        got += whole ? 1 : 0;
        // Every byte is queued: the member reads to the end of it. (A close
        // with bytes unread from it would reset the connection instead.)
        discard_input(c->fd.get());
        ::shutdown(c->fd.get(), SHUT_WR);
        c->closed = true;
      } else {
        fds.push_back({c->fd.get(), POLLOUT, 0});
        busy.push_back(c);
      }
    }
    if (busy.empty()) return got;
    const auto left = left_until(deadline);
    if (left.count() == 0) break;
    if (::poll(fds.data(), fds.size(), static_cast<int>(left.count())) < 0 && errno != EINTR) break;
  }
  for (Connection* c : to) drop(*c, "");
  return got;
}

std::chrono::milliseconds PeerAgent::record_wait() const {
  const std::chrono::milliseconds settle{2'000};
  return stopping_ ? config_.gather_timeout + settle : settle;
}

std::string PeerAgent::await_record(std::string& why) {
  Connection* hub = nullptr;
  for (auto& c : connections_) {
    if (!c->closed && c->state == Connection::State::joined) hub = c.get();
  }
  if (config_.hub || !config_.sends_part || hub == nullptr || !told_done_) {
    why = "this server's agent was no longer connected to rank 0's server at the end";
    return {};
  }
  if (leaving_) {
    // The job goes on without this server (its launcher is gone): its record
    // is written when the job ends, which no one here waits for.
    why = "this server left the job when its davincirun was gone";
    return {};
  }
  const auto deadline = Clock::now() + record_wait();
  std::string record;
  try {
    for (;;) {
      while (auto f = hub->parser.next()) {
        hub->seal.open(*f);  // every frame, in order: the tags count them
        if (f->type != PeerFrame::record) continue;
        PeerPartChunk chunk = decode_part_chunk(f->payload);
        if (record.size() + chunk.bytes.size() > max_shared_record_bytes) {
          throw PeerProtocolError("the job record it sent is too large");
        }
        record += chunk.bytes;
        if (!chunk.last) continue;
        if (record.empty()) why = "rank 0's server sent none: the record is too large to send to every server";
        return record;
      }
      const auto left = left_until(deadline);
      pollfd p{hub->fd.get(), POLLIN, 0};
      if (left.count() == 0 || (::poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR)) {
        why = "it did not come from rank 0's server within " + seconds_text(record_wait());
        return {};
      }
      char buf[16384];
      const ssize_t n = ::read(hub->fd.get(), buf, sizeof buf);
      if (n > 0) hub->parser.feed(std::string_view(buf, static_cast<std::size_t>(n)));
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
        why = "rank 0's server closed its connection before it sent the record";
        return {};
      }
    }
  } catch (const PeerProtocolError& e) {
    why = std::string("rank 0's server sent a bad record: ") + e.what();
  }
  return {};
}

}  // namespace davincirun::detail
