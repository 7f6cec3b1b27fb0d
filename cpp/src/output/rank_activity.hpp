// What one rank did over time, kept while it runs for the job record
// (job.json) and the live views: its output in time buckets and the
// progress its lines reported. Bounded: at most max_buckets buckets and
// max_samples samples however long the rank runs.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "davincirun/rank_progress.hpp"

namespace davincirun::detail {

using WallClock = std::chrono::system_clock;

/// Output bytes per interval since `start`. The intervals begin 0.1 s long
/// and double (each pair of buckets merged) whenever the run outgrows
/// max_buckets of them, so a week-long rank costs what a minute-long one does.
class ActivityHistory {
 public:
  static constexpr std::size_t max_buckets = 256;
  static constexpr double first_step_s = 0.1;

  ActivityHistory() : start_(WallClock::now()) {}
  explicit ActivityHistory(WallClock::time_point start) : start_(start) {}
  void add(std::uint64_t bytes, WallClock::time_point now);
  /// Bytes a second over the `window_s` before `now` (whole buckets).
  std::uint64_t rate(WallClock::time_point now, double window_s = 5.0) const;

  WallClock::time_point start() const noexcept { return start_; }
  double step_s() const noexcept { return step_s_; }
  /// The buckets up to the last one that holds output.
  const std::vector<std::uint64_t>& buckets() const noexcept { return buckets_; }

 private:
  WallClock::time_point start_;
  double step_s_ = first_step_s;
  std::vector<std::uint64_t> buckets_;
};

/// The progress a rank's lines reported (parse_progress()): where it is
/// now, and samples of where it was.
class ProgressHistory {
 public:
  static constexpr std::size_t max_samples = 128;
  struct Sample {
    WallClock::time_point time;
    std::int64_t epoch = -1;
    std::int64_t step = -1;
  };

  /// Takes what one line said; true when the rank moved on.
  bool add(const ProgressReading& reading, WallClock::time_point now);
  bool known() const noexcept { return !samples_.empty(); }
  std::int64_t epoch() const noexcept { return epoch_; }
  std::int64_t step() const noexcept { return step_; }
  /// The largest step total printed ("45/100": 100), or -1.
  std::int64_t steps() const noexcept { return steps_; }
  /// The largest step seen in an epoch now over: a measure of an epoch's
  /// length when no total is printed (MindSpore's "epoch: 2 step: 45").
  std::int64_t longest_epoch() const noexcept { return longest_epoch_; }
  /// A number comparable across ranks: epoch * steps_per_epoch + step.
  double position(std::int64_t steps_per_epoch) const noexcept;
  static double position_of(const Sample& s, std::int64_t steps_per_epoch) noexcept;
  /// "epoch 2/10 step 45/100", "step 300", "".
  std::string text() const;
  /// Oldest first; thinned to every other one when full (the newest kept).
  const std::vector<Sample>& samples() const noexcept { return samples_; }

 private:
  std::int64_t epoch_ = -1;
  std::int64_t epochs_ = -1;
  std::int64_t step_ = -1;
  std::int64_t steps_ = -1;
  std::int64_t longest_epoch_ = -1;
  std::vector<Sample> samples_;
};

}  // namespace davincirun::detail
