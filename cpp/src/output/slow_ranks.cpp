#include "output/slow_ranks.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

namespace davincirun::detail {

std::optional<std::pair<double, std::size_t>> SlowRanks::median(const std::vector<Standing>& standings,
                                                                std::size_t at_least) {
  std::vector<std::pair<double, std::size_t>> known;
  for (std::size_t i = 0; i < standings.size(); ++i) {
    if (const auto& p = standings[i].position) known.emplace_back(*p, i);
  }
  if (known.empty() || known.size() < at_least) return std::nullopt;
  const auto middle = known.begin() + static_cast<std::ptrdiff_t>(known.size() / 2);
  std::nth_element(known.begin(), middle, known.end());
  return *middle;
}

std::vector<SlowRanks::Change> SlowRanks::evaluate(const std::vector<Standing>& standings, Clock::time_point now,
                                                   std::optional<double> job_pace) {
  std::vector<Change> changes;
  if (window_.count() <= 0) return changes;
  ranks_.resize(standings.size());
  std::optional<std::pair<double, std::size_t>> median = SlowRanks::median(standings);
  if (job_pace) median = std::make_pair(*job_pace, std::size_t{0});
  for (std::size_t i = 0; i < standings.size(); ++i) {
    Rank& r = ranks_[i];
    const Standing& s = standings[i];
    bool behind = false;
    if (median && s.running && s.position) {
      const double gap = median->first - *s.position;
      behind = gap >= min_steps_behind && gap >= min_fraction_behind * median->first;
    }
    if (!behind) {
      r.behind_since.reset();
      if (r.slow) {
        r.slow = false;
        changes.push_back({i, false, median ? median->second : i, job_pace, {}});
      }
      continue;
    }
    if (!r.behind_since) r.behind_since = now;
    const auto behind_for = std::chrono::duration_cast<std::chrono::milliseconds>(now - *r.behind_since);
    if (!r.slow && behind_for >= window_) {
      r.slow = true;
      changes.push_back({i, true, median->second, job_pace, behind_for});
    }
  }
  return changes;
}

}  // namespace davincirun::detail
