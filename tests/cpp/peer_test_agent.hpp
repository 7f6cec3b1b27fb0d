// A peer agent for the tests of the peer channel (peers/peer_agent.hpp).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "peers/peer_agent.hpp"

namespace davincirun_test {

using namespace davincirun::detail;
using namespace std::chrono_literals;

// One agent on its thread, as in a job's supervisor process, with what it
// told its owner (stops, decisions) and whether run() returned.
class Agent {
 public:
  // `before_run`: sets what must be set before run() (PeerAgent::on_pace).
  explicit Agent(PeerConfig config, const std::function<void(PeerAgent&)>& before_run = {}) {
    agent_ = std::make_unique<PeerAgent>(
        std::move(config), [this](const PeerEvent& e) { add([&] { stops_.push_back(e); }); },
        [this](const std::string& line, bool) { add([&] { notices_.push_back(line); }); },
        [] { return std::uint64_t{0}; });
    if (before_run) before_run(*agent_);
    agent_->on_decision([this](const PeerDecision& d, const std::optional<PeerEvent>& unheard) {
      add([&] {
        decisions_.push_back(d);
        unheard_.push_back(unheard.has_value());
      });
    });
    thread_ = std::thread([this] {
      agent_->run();
      add([&] { returned_ = true; });
    });
  }
  ~Agent() {
    agent_->abort();
    thread_.join();
  }
  PeerAgent& agent() { return *agent_; }
  bool wait(const std::function<bool()>& ready, std::chrono::milliseconds limit = 5000ms) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, limit, ready);
  }
  bool wait_stops(std::size_t n) {
    return wait([&] { return stops_.size() >= n; });
  }
  std::optional<PeerDecision> wait_decision(std::size_t n) {
    if (!wait([&] { return decisions_.size() >= n; })) return std::nullopt;
    std::lock_guard<std::mutex> lock(mutex_);
    return decisions_[n - 1];
  }
  bool wait_returned() {
    return wait([&] { return returned_; });
  }
  std::size_t stop_count() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stops_.size();
  }
  // Within wait()'s predicate, which holds the lock.
  const std::vector<std::string>& notices_unlocked() const { return notices_; }
  bool unheard(std::size_t n) {
    std::lock_guard<std::mutex> lock(mutex_);
    return unheard_.at(n - 1);
  }

 private:
  template <typename F>
  void add(F f) {
    std::lock_guard<std::mutex> lock(mutex_);
    f();
    changed_.notify_all();
  }
  std::unique_ptr<PeerAgent> agent_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<PeerEvent> stops_;
  std::vector<std::string> notices_;
  std::vector<PeerDecision> decisions_;
  std::vector<bool> unheard_;
  bool returned_ = false;
};

// Server `index` of a job of `servers` (10.0.0.11, 10.0.0.12...) on
// loopback: the hub at index 0, on `port`; timeouts short for tests.
inline PeerConfig config_for(std::uint32_t index, int port, std::size_t servers = 3) {
  PeerConfig c;
  c.hub = index == 0;
  c.hub_address = "127.0.0.1";
  c.port = port;
  c.server_index = index;
  for (std::size_t i = 0; i < servers; ++i) c.server_ids.push_back("10.0.0." + std::to_string(11 + i));
  c.job_key = "the job's key";
  c.peer_timeout = 2000ms;
  c.heartbeat_interval = heartbeat_interval_for(c.peer_timeout);
  c.connect_timeout = 5000ms;
  return c;
}

}  // namespace davincirun_test
