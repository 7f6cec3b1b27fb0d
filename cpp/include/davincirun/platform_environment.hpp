// Platform variables: where CANN and MindSpore write their own files (plogs,
// operator build files, MindSpore logs), and the ModelArts rules of
// davincirunsdk 0.1.x. Every one is a default: a variable the user set
// (inherited or given with `env`) always wins.
//
// The variables, their values and the component reading each are listed in
// docs/environment.md ("Platform defaults").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "davincirun/environment.hpp"

namespace davincirun {

/// The large local disk of ModelArts and OpenI notebooks, used when it is an
/// existing directory this process may write into.
inline constexpr std::string_view default_cache_root = "/cache";

/// The directory this project uses on the cache disk, `<root>/davincirun`,
/// or "" when there is none. The root is the launcher's
/// DAVINCIRUN_CACHE_ROOT when set and not empty (an absolute path; "off":
/// none), else default_cache_root. The root must exist and be writable and
/// searchable (access(2) W_OK|X_OK); `<root>/davincirun` itself is created
/// by the job. Throws ConfigError for a relative DAVINCIRUN_CACHE_ROOT.
std::string usable_cache_dir(const Environment& launcher);

/// The log directory when none is given (LaunchOptions::log_dir empty):
/// `<cache_dir>/log` when `cache_dir` (from usable_cache_dir) is not empty,
/// else "./log".
std::string default_log_dir(const std::string& cache_dir);

/// Sentences for LaunchPlan::warnings about the platform variables of
/// `environment` (inherited plus explicit): a MA_ALGORITHM_OPERATOR that is
/// set but is no JSON object (then the IDE-mode rule is not applied); a
/// DAVINCIRUN_CACHE_ROOT that is set (absolute, not "off") but missing, no
/// directory, or not writable, so the cache disk is not used.
std::vector<std::string> platform_warnings(const Environment& environment);

/// Where one run's platform directories go.
struct PlatformPaths {
  std::string run_dir;    ///< absolute run directory, `<log_dir>/<UTC time>-<job id>`
  std::string cache_dir;  ///< usable_cache_dir() of the plan; "" = nothing goes to the cache disk
};

/// A directory a platform default names, to be created (mode 0700) before
/// the rank starts.
struct PlatformDirectory {
  std::string path;               ///< absolute
  bool remove_after_job = false;  ///< a per-job cache, removed once the job is over
  bool operator==(const PlatformDirectory& other) const {
    return path == other.path && remove_after_job == other.remove_after_job;
  }
};

/// Sets the platform defaults of one rank (`rank`: its global rank; -1 for
/// MindSpore's scheduler, whose directories are named "scheduler" where a
/// rank's are "rank_<rank>") in
/// `env`, that rank's environment with the user's variables already in it,
/// each only when `env` does not hold the variable (an empty value counts
/// as set). Which rules apply is read from `env` itself: ASCEND_PROCESS_LOG_PATH
/// always; SLOG_PRINT_TO_STDOUT in ModelArts IDE mode (MA_ALGORITHM_OPERATOR);
/// by MA_DIAG_MODE_ENV / MA_RUN_MODE_ENV (and MA_ENGINE_VERSION) the log
/// levels and MindSpore log directories 0.1.x set, inside the run directory;
/// ASCEND_WORK_PATH and ASCEND_CACHE_PATH when `paths.cache_dir` is set.
/// Returns the directories the values it set name, in table order, without
/// duplicates; creates nothing.
std::vector<PlatformDirectory> apply_platform_defaults(Environment& env, int rank, const PlatformPaths& paths);

}  // namespace davincirun
