#include "common/edit_distance.hpp"

#include <algorithm>
#include <vector>

namespace davincirun::detail {

std::size_t edit_distance(std::string_view a, std::string_view b, std::size_t limit) {
  const std::size_t gap = a.size() > b.size() ? a.size() - b.size() : b.size() - a.size();
  if (gap > limit) return limit + 1;
  // Three rows of the table: i - 2, i - 1 and i.
  std::vector<std::size_t> before(b.size() + 1), previous(b.size() + 1), current(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    std::size_t row_min = current[0];
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0u : 1u;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
      row_min = std::min(row_min, current[j]);
    }
    if (row_min > limit) return limit + 1;  // every later row is at least as large
    std::swap(before, previous);
    std::swap(previous, current);
  }
  return std::min(previous[b.size()], limit + 1);
}

std::optional<NearName> nearest_name(std::string_view typed, const std::vector<std::string>& names) {
  std::optional<NearName> best;
  for (const std::string& name : names) {
    // Bounded by the best so far: most names are dismissed by their length
    // alone. Over the bound, edit_distance answers bound + 1: never a tie.
    const std::size_t bound = best ? best->distance : unlike_edits;
    const std::size_t distance = edit_distance(typed, name, bound);
    if (!best || distance < best->distance || (distance == best->distance && name < best->name)) {
      best = NearName{name, distance};
    }
  }
  return best;
}

}  // namespace davincirun::detail
