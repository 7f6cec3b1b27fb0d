// The directories a job's platform defaults name (platform_environment.hpp):
// made before the ranks start, taken back when the job never ran, and the
// per-job caches among them removed once the job is over.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "davincirun/environment.hpp"
#include "davincirun/platform_environment.hpp"

namespace davincirun::detail {

class PlatformDirs {
 public:
  explicit PlatformDirs(PlatformPaths paths) : paths_(std::move(paths)) {}
  PlatformDirs(const PlatformDirs&) = delete;
  PlatformDirs& operator=(const PlatformDirs&) = delete;

  /// Sets rank `rank`'s platform defaults in `env` (apply_platform_defaults)
  /// and creates the directories they name: missing parents with mode 0755
  /// (umask applies), the directory itself 0700. Throws ConfigError naming
  /// the directory that cannot be made.
  void prepare(Environment& env, int rank);
  /// For a job that never ran: removes every directory prepare() created,
  /// with what is in it (symlinks are not followed).
  void discard() noexcept;
  /// For a job that ran, once its processes are gone: removes the
  /// directories prepare() made inside the run directory that are still
  /// empty, deepest first, up to the topmost one it made. A run folder then keeps only what a rank
  /// wrote (CANN's process logs, MindSpore's om/ of a failed compile), not
  /// a skeleton of empty folders made in case one would.
  void prune_empty() noexcept;
  /// The per-job caches prepare() created (PlatformDirectory::remove_after_job).
  const std::vector<std::string>& removed_after_job() const noexcept { return removed_after_job_; }

 private:
  PlatformPaths paths_;
  std::vector<std::string> created_;                       ///< the topmost directory each creation made, in order
  std::vector<std::pair<std::string, std::string>> made_;  ///< each directory made, and the topmost made with it
  std::vector<std::string> removed_after_job_;
};

}  // namespace davincirun::detail
