// How far apart two names are, for "did you mean ...?" in messages: a
// command not found in PATH, a rank table file not found in its folder.
#pragma once

#include <cstddef>
#include <string_view>

namespace davincirun::detail {

/// The edit distance between `a` and `b` (insertions, deletions,
/// substitutions and swaps of two neighbouring characters, each 1: the
/// optimal string alignment distance), or `limit` + 1 when it is larger
/// than `limit`.
std::size_t edit_distance(std::string_view a, std::string_view b, std::size_t limit);

}  // namespace davincirun::detail
