// What other threads (and signal handlers) ask of a Supervisor's event
// loop: stop requests, signals, the launcher gone, the peer channel's
// events, signals to forward, notices to print. Each request only sets an
// atomic (or, where a value must travel, takes a mutex) and writes to one
// eventfd; the loop takes them all at once and turns them into the life
// cycle's events (lifecycle.hpp), the first request first.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "davincirun/lifecycle.hpp"
#include "davincirun/supervisor.hpp"
#include "davincirun/unique_fd.hpp"

namespace davincirun::detail {

class RequestInbox {
 public:
  /// Throws SystemError when the eventfd cannot be made.
  RequestInbox();

  /// Readable when something arrived.
  int fd() const noexcept { return wake_.get(); }

  // Async-signal-safe: atomics and a write(2).
  void stop() noexcept;
  void stop_orphaned() noexcept;
  void kill(bool dropped) noexcept;
  /// Async-signal-safe when origin.sender_name is empty.
  void stop_by_signal(int signal, const SignalOrigin& origin) noexcept;
  void servers_done() noexcept;
  void forward(int signal) noexcept;
  // Not from a signal handler: these take a mutex.
  void peer(JobEvent event, PeerStop stop);
  void decided(ServersDecision decision);
  void post(std::string text, bool info);

  /// A request turned into an event of the life cycle.
  struct Request {
    explicit Request(JobEvent e) : event(e) {}
    JobEvent event;
    int signal = 0;                ///< engine_signal
    SignalOrigin origin;           ///< engine_signal
    std::optional<PeerStop> peer;  ///< the peer channel's events
    bool dropped = false;          ///< kill_request: the launcher dropped the job
  };
  /// On the loop's thread: everything that arrived since the last call,
  /// the request that came first (of all time) first; a person's requests
  /// after their first are repeated_stop_request.
  std::vector<Request> take();
  /// Signals to forward since the last call: bit N for signal N.
  std::uint32_t take_forwards() noexcept { return forwards_.exchange(0); }
  /// The hub's decisions since the last call, the first first.
  std::vector<ServersDecision> take_decisions();
  /// Notices posted since the last call: text, and whether it is information only.
  std::vector<std::pair<std::string, bool>> take_notices();

 private:
  enum Kind : int { none = 0, person, signal, orphaned, killed, peer_event };
  void wake() noexcept;
  void arrived(Kind kind) noexcept;

  UniqueFd wake_;
  std::atomic<int> first_{none};  // the Kind of the first stop-like request of all
  bool first_taken_ = false;      // the loop's own
  std::atomic<std::uint64_t> persons_{0};
  std::uint64_t persons_seen_ = 0;
  std::atomic<std::uint64_t> signals_{0};
  std::uint64_t signals_seen_ = 0;
  std::atomic<int> first_signal_{0};
  std::atomic<int> first_receiver_{0};
  std::atomic<pid_t> first_sender_{0};
  std::atomic<bool> orphaned_{false};
  bool orphaned_seen_ = false;
  std::atomic<int> killed_{0};  // 1: kill, 2: kill because dropped
  bool killed_seen_ = false;
  std::atomic<bool> servers_done_{false};
  bool servers_done_seen_ = false;
  std::atomic<std::uint32_t> forwards_{0};

  std::mutex mutex_;  // guards what follows
  std::string first_sender_name_;
  std::vector<std::pair<JobEvent, PeerStop>> peers_;
  std::vector<ServersDecision> decisions_;
  std::vector<std::pair<std::string, bool>> notices_;
};

}  // namespace davincirun::detail
