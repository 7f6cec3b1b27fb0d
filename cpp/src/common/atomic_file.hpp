// Files a user asked for and may read while they are replaced: written whole
// under a temporary name, then renamed over the old one.
#pragma once

#include <sys/types.h>
#include <string>

namespace davincirun::detail {

/// Whether the file is on disk before it takes its name.
enum class Durability {
  flushed,  ///< fsync first: a crash of the machine leaves the old file, never an empty one
  /// No fsync (0.3-0.4 ms each on this machine's disk, at the end of every
  /// job): for the run directory's record files, which, like the rank logs
  /// beside them, are only as durable as the page cache.
  page_cache,
};

/// Writes `text` to `path` atomically: a new temporary file in the same
/// directory (".<name>.XXXXXX"), given `mode` whatever the umask, written,
/// flushed to disk (fsync) unless `durability` says not, then renamed to
/// `path`. A reader sees the old file or the new one, never a part; an
/// existing file (or a symlink) at `path` is replaced, not written through.
/// On failure the temporary file is removed, `path` is left as it was, and
/// SystemError("<what>: <reason>") is thrown.
void write_file_atomically(const std::string& path, const std::string& text, mode_t mode, const std::string& what,
                           Durability durability = Durability::flushed);

}  // namespace davincirun::detail
