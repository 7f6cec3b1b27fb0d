// How far apart two names are, for "did you mean ...?" in messages: a
// command not found in PATH, a rank table file not found in its folder, a
// server id not in the rank table.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace davincirun::detail {

/// The edit distance between `a` and `b` (insertions, deletions,
/// substitutions and swaps of two neighbouring characters, each 1: the
/// optimal string alignment distance), or `limit` + 1 when it is larger
/// than `limit`.
std::size_t edit_distance(std::string_view a, std::string_view b, std::size_t limit);

/// Beyond this many edits every name is as unlike as any other (NAME_MAX is 255).
constexpr std::size_t unlike_edits = 255;

/// A name and how many edits it is from the one typed.
struct NearName {
  std::string name;
  std::size_t distance;
};

/// Of `names`, the nearest to `typed` (ties: the first in byte order); nullopt
/// when `names` is empty.
std::optional<NearName> nearest_name(std::string_view typed, const std::vector<std::string>& names);

}  // namespace davincirun::detail
