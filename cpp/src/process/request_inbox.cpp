#include "process/request_inbox.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "davincirun/errors.hpp"

namespace davincirun::detail {

RequestInbox::RequestInbox() {
  wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_) throw SystemError("eventfd", errno);
}

void RequestInbox::wake() noexcept {
  const std::uint64_t one = 1;
  const ssize_t ignored = ::write(wake_.get(), &one, sizeof one);
  (void)ignored;
}

void RequestInbox::arrived(Kind kind) noexcept {
  int expected = none;
  first_.compare_exchange_strong(expected, kind);
  wake();
}

void RequestInbox::stop() noexcept {
  persons_.fetch_add(1);
  arrived(person);
}

void RequestInbox::stop_orphaned() noexcept {
  orphaned_.store(true);
  arrived(orphaned);
}

void RequestInbox::kill(bool dropped) noexcept {
  int expected = 0;
  killed_.compare_exchange_strong(expected, dropped ? 2 : 1);
  arrived(killed);
}

void RequestInbox::stop_by_signal(int sig, const SignalOrigin& origin) noexcept {
  int expected = 0;
  if (first_signal_.compare_exchange_strong(expected, sig)) {
    first_receiver_.store(static_cast<int>(origin.receiver));
    first_sender_.store(origin.sender_pid);
    if (!origin.sender_name.empty()) {
      const std::lock_guard<std::mutex> lock(mutex_);
      first_sender_name_ = origin.sender_name;
    }
  }
  signals_.fetch_add(1);
  arrived(signal);
}

void RequestInbox::servers_done() noexcept {
  servers_done_.store(true);
  wake();
}

void RequestInbox::forward(int sig) noexcept {
  if (sig <= 0 || sig >= 32) return;
  forwards_.fetch_or(std::uint32_t{1} << sig);
  wake();
}

void RequestInbox::peer(JobEvent event, PeerStop stop) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    peers_.emplace_back(event, std::move(stop));
  }
  arrived(peer_event);
}

void RequestInbox::decided(ServersDecision decision) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    decisions_.push_back(std::move(decision));
  }
  wake();
}

std::vector<ServersDecision> RequestInbox::take_decisions() {
  const std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(decisions_, {});
}

void RequestInbox::post(std::string text, bool info) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    notices_.emplace_back(std::move(text), info);
  }
  wake();
}

std::vector<std::pair<std::string, bool>> RequestInbox::take_notices() {
  const std::lock_guard<std::mutex> lock(mutex_);
  return std::move(notices_);
}

std::vector<RequestInbox::Request> RequestInbox::take() {
  std::uint64_t count = 0;
  const ssize_t ignored = ::read(wake_.get(), &count, sizeof count);
  (void)ignored;
  std::vector<Request> out;
  const auto add_persons = [&] {
    for (const std::uint64_t n = persons_.load(); persons_seen_ < n; ++persons_seen_) {
      out.emplace_back(persons_seen_ == 0 ? JobEvent::stop_request : JobEvent::repeated_stop_request);
    }
  };
  const auto add_signals = [&] {
    for (const std::uint64_t n = signals_.load(); signals_seen_ < n; ++signals_seen_) {
      Request r(JobEvent::engine_signal);
      r.signal = first_signal_.load();
      r.origin.receiver = static_cast<SignalReceiver>(first_receiver_.load());
      r.origin.sender_pid = first_sender_.load();
      const std::lock_guard<std::mutex> lock(mutex_);
      r.origin.sender_name = first_sender_name_;
      out.push_back(std::move(r));
    }
  };
  const auto add_orphaned = [&] {
    if (!orphaned_seen_ && orphaned_.load()) {
      orphaned_seen_ = true;
      out.emplace_back(JobEvent::launcher_gone);
    }
  };
  const auto add_killed = [&] {
    if (const int k = killed_.load(); !killed_seen_ && k != 0) {
      killed_seen_ = true;
      Request r(JobEvent::kill_request);
      r.dropped = k == 2;
      out.push_back(std::move(r));
    }
  };
  const auto add_peers = [&] {
    std::vector<std::pair<JobEvent, PeerStop>> events;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      events.swap(peers_);
    }
    for (auto& [event, stop] : events) {
      Request r(event);
      r.peer = std::move(stop);
      out.push_back(std::move(r));
    }
  };
  // The first request of all names the stop: it goes first; the others
  // follow in a fixed order.
  if (!first_taken_) {
    switch (static_cast<Kind>(first_.load())) {
      case person: add_persons(); break;
      case signal: add_signals(); break;
      case orphaned: add_orphaned(); break;
      case killed: add_killed(); break;
      case peer_event: add_peers(); break;
      case none: break;
    }
    first_taken_ = !out.empty();
  }
  add_persons();
  add_signals();
  add_orphaned();
  add_killed();
  add_peers();
  if (!servers_done_seen_ && servers_done_.load()) {
    servers_done_seen_ = true;
    out.emplace_back(JobEvent::servers_done);
  }
  return out;
}

}  // namespace davincirun::detail
