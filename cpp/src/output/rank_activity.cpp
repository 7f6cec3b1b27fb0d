#include "output/rank_activity.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

namespace davincirun::detail {

namespace {

double seconds_between(WallClock::time_point from, WallClock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

void ActivityHistory::add(std::uint64_t bytes, WallClock::time_point now) {
  if (bytes == 0) return;
  const double since = std::max(0.0, seconds_between(start_, now));
  auto index = static_cast<std::size_t>(since / step_s_);
  while (index >= max_buckets) {  // merge pairs: intervals twice as long
    for (std::size_t i = 0; i < buckets_.size(); i += 2) {
      buckets_[i / 2] = buckets_[i] + (i + 1 < buckets_.size() ? buckets_[i + 1] : 0);
    }
    buckets_.resize((buckets_.size() + 1) / 2);
    step_s_ *= 2;
    index = static_cast<std::size_t>(since / step_s_);
  }
  if (buckets_.size() <= index) buckets_.resize(index + 1, 0);
  buckets_[index] += bytes;
}

std::uint64_t ActivityHistory::rate(WallClock::time_point now, double window_s) const {
  const double since = seconds_between(start_, now);
  if (since <= 0 || buckets_.empty()) return 0;
  const auto last = static_cast<std::size_t>(since / step_s_);
  const auto count = std::max<std::size_t>(1, static_cast<std::size_t>(window_s / step_s_));
  const std::size_t first = last + 1 > count ? last + 1 - count : 0;
  std::uint64_t bytes = 0;
  for (std::size_t i = first; i <= last && i < buckets_.size(); ++i) bytes += buckets_[i];
  const double span = std::min(since, static_cast<double>(last + 1 - first) * step_s_);
  return span > 0 ? static_cast<std::uint64_t>(static_cast<double>(bytes) / span) : 0;
}

bool ProgressHistory::add(const ProgressReading& reading, WallClock::time_point now) {
  std::int64_t epoch = epoch_;
  std::int64_t step = step_;
  if (reading.epoch >= 0 && reading.epoch != epoch_) {
    if (epoch_ >= 0 && step_ >= 0) longest_epoch_ = std::max(longest_epoch_, step_);
    epoch = reading.epoch;
    if (reading.step < 0) step = -1;  // a new epoch begins at its first step
  }
  if (reading.epochs > 0) epochs_ = reading.epochs;
  if (reading.step >= 0) step = reading.step;
  if (reading.steps > 0) steps_ = std::max(steps_, reading.steps);
  const bool moved = epoch != epoch_ || step != step_;
  epoch_ = epoch;
  step_ = step;
  if (!moved && !samples_.empty()) return false;
  if (samples_.size() >= max_samples) {  // keep every other one, and the newest
    std::size_t kept = 0;
    for (std::size_t i = 0; i < samples_.size(); i += 2) samples_[kept++] = samples_[i];
    samples_.resize(kept);
  }
  samples_.push_back({now, epoch_, step_});
  return moved;
}

double ProgressHistory::position_of(const Sample& s, std::int64_t steps_per_epoch) noexcept {
  const double per_epoch = static_cast<double>(std::max<std::int64_t>(1, steps_per_epoch));
  const double step = static_cast<double>(std::max<std::int64_t>(0, s.step));
  return s.epoch < 0 ? step : static_cast<double>(s.epoch) * per_epoch + step;
}

double ProgressHistory::position(std::int64_t steps_per_epoch) const noexcept {
  return position_of({{}, epoch_, step_}, steps_per_epoch);
}

std::string ProgressHistory::text() const {
  std::string out;
  if (epoch_ >= 0) out = epochs_ > 0 ? fmt::format("epoch {}/{}", epoch_, epochs_) : fmt::format("epoch {}", epoch_);
  if (step_ >= 0) {
    if (!out.empty()) out += ' ';
    out += steps_ > 0 ? fmt::format("step {}/{}", step_, steps_) : fmt::format("step {}", step_);
  }
  return out;
}

}  // namespace davincirun::detail
