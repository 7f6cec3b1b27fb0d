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

// mkdir -p; returns the topmost directory it made ("" when all existed).
std::string make_dirs(const std::string& path) {
  std::string top;
  for (std::size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    const std::string part = path.substr(0, pos);
    const mode_t mode = pos == path.size() ? 0700 : 0755;
    if (::mkdir(part.c_str(), mode) == 0) {
      if (top.empty()) top = part;
    } else if (errno != EEXIST) {
      throw ConfigError(fmt::format("cannot create directory '{}': {}", part, std::strerror(errno)));
    }
  }
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
