// Which ranks fall behind the others, from the progress their output
// reports (ProgressHistory::position()).
//
// The rule: take the median position of every rank that reported progress
// (the upper median: with two ranks, the one ahead; ranks that already
// exited count with their last position). A running rank is behind when it
// trails that median by at least 2 steps and by at least 10 % of the
// median's position; it is slow once it has been behind, without a break,
// for the window (SupervisorOptions::slow_window), and no longer slow as
// soon as it is not behind (or has exited). Ranks in lockstep (every step
// an all-reduce) report the same step: a slow one slows them all, which
// shows as the job's pace, not as one rank behind.
//
// A job of several servers compares against the job's pace instead: the
// upper median of every server's median (JobProgress::server_pace(), carried
// in the peer channel's heartbeats, peers/peer_agent.hpp), so that a rank,
// or a whole server, behind the others on other servers is named too.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace davincirun::detail {

/// One server's pace in a job of several (peers/peer_pace.cpp).
struct ServerPace {
  std::optional<double> position;  ///< its ranks' upper median, in steps; none before any reported progress
  std::vector<std::string> slow;   ///< its slow ranks' labels ("rank 9")
};

class SlowRanks {
 public:
  using Clock = std::chrono::steady_clock;
  struct Standing {
    std::optional<double> position;  ///< none: it reported no progress
    bool running = true;
  };
  struct Change {
    std::size_t index = 0;
    bool slow = false;                        ///< became slow, or stopped being slow
    std::size_t median_index = 0;             ///< the rank at the median (not with a job pace)
    std::optional<double> job_pace;           ///< the job's pace it was compared with, when given
    std::chrono::milliseconds behind_for{0};  ///< how long it has been behind
  };

  /// `window`: how long a rank must stay behind; zero: never slow.
  explicit SlowRanks(std::chrono::milliseconds window) : window_(window) {}
  /// The ranks that became slow or stopped being slow since the last call.
  /// `standings` by index, the same length at every call (a new attempt:
  /// reset()). `job_pace`: the position to trail instead of these ranks'
  /// median (a job of several servers).
  std::vector<Change> evaluate(const std::vector<Standing>& standings, Clock::time_point now,
                               std::optional<double> job_pace = std::nullopt);
  /// The upper median of the positions known, and the rank at it; none
  /// when fewer than `at_least` are known.
  static std::optional<std::pair<double, std::size_t>> median(const std::vector<Standing>& standings,
                                                              std::size_t at_least = 2);
  bool slow(std::size_t index) const noexcept { return index < ranks_.size() && ranks_[index].slow; }
  /// Forgets every rank: a new attempt starts them again.
  void reset() { ranks_.clear(); }

  static constexpr double min_steps_behind = 2;
  static constexpr double min_fraction_behind = 0.1;

 private:
  struct Rank {
    std::optional<Clock::time_point> behind_since;
    bool slow = false;
  };
  std::chrono::milliseconds window_;
  std::vector<Rank> ranks_;
};

}  // namespace davincirun::detail
