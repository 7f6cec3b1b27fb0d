// Removing what a job leaves behind (LaunchOptions::remove_after_job).
#pragma once

#include <string>

namespace davincirun::detail {

/// Removes `path` and, when it is a directory, everything below it, bottom
/// up. Symbolic links are removed, never followed. Best effort: a missing
/// path is no error, and entries that cannot be removed are left in place.
/// Written on nftw(3) rather than std::filesystem, which GCC 7-era C++
/// libraries lack.
void remove_tree(const std::string& path) noexcept;

}  // namespace davincirun::detail
