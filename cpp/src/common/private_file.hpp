// Files the job writes for itself: the normalized rank table, the summary.
#pragma once

#include <string>

namespace davincirun::detail {

/// Creates `path` (never an existing file, never through a symlink: O_EXCL |
/// O_NOFOLLOW) with mode 0600 whatever the umask, and writes `text` to it.
/// On failure the file is removed and SystemError("<what>: <reason>") thrown.
void write_private_file(const std::string& path, const std::string& text, const std::string& what);

}  // namespace davincirun::detail
