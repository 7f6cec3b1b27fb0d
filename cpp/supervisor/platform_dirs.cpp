#include "platform_dirs.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/remove_tree.hpp"
#include "davincirun/errors.hpp"

namespace davincirun::detail {

namespace {

// mkdir -p from the bottom up: the directory itself first, its parent only
// when that is missing (one call per directory once the run's are made, where
// a walk from "/" took one per component: ~100 calls for 8 ranks). The leaf
// gets 0700, parents made on the way 0755. Returns the topmost directory it
// made ("" when all existed).
std::string make_missing(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) == 0) return path;
  if (errno == EEXIST) return "";
  const std::size_t slash = path.rfind('/');
  if (errno != ENOENT || slash == 0 || slash == std::string::npos) {
    throw ConfigError(fmt::format("cannot create directory '{}': {}", path, std::strerror(errno)));
  }
  std::string top = make_missing(path.substr(0, slash), 0755);
  if (::mkdir(path.c_str(), mode) == 0) return top.empty() ? path : top;
  if (errno != EEXIST) throw ConfigError(fmt::format("cannot create directory '{}': {}", path, std::strerror(errno)));
  return top;  // made meanwhile by someone else
}

std::string make_dirs(const std::string& path) {
  const std::string top = make_missing(path, 0700);
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw ConfigError(fmt::format("'{}' is not a directory", path));
  }
  return top;
}

}  // namespace

void PlatformDirs::prepare(Environment& env, int rank) {
  for (const PlatformDirectory& dir : apply_platform_defaults(env, rank, paths_)) {
    const std::string top = make_dirs(dir.path);
    // A parent outside the run directory (<cache>/work) may be shared by
    // another job by now: only this job's own directories are ever taken back.
    const bool in_run_dir = top.compare(0, paths_.run_dir.size() + 1, paths_.run_dir + "/") == 0;
    if (!top.empty()) created_.push_back(in_run_dir ? top : dir.path);
    // Outside the run directory (<cache>/work/<run>), an empty directory stays where CANN expects it.
    if (!top.empty() && in_run_dir) made_.emplace_back(dir.path, top);
    if (dir.remove_after_job) removed_after_job_.push_back(dir.path);
  }
}

void PlatformDirs::prune_empty() noexcept {
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) {
    const auto& [path, top] = *it;
    // rmdir(2) removes only an empty directory: a rank's file keeps it, and its parents.
    for (std::string dir = path; dir.size() >= top.size() && ::rmdir(dir.c_str()) == 0;) {
      dir.resize(dir.rfind('/'));
    }
  }
  made_.clear();
}

void PlatformDirs::discard() noexcept {
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) remove_tree(*it);
  created_.clear();
}

}  // namespace davincirun::detail
