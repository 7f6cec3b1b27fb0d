#include "process/command_lookup.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "davincirun/process.hpp"

namespace davincirun {

std::optional<std::string> find_executable(const std::string& argv0, const std::string& path_list, int& error) {
  error = 0;
  if (argv0.empty()) {
    error = ENOENT;
    return std::nullopt;
  }
  if (argv0.find('/') != std::string::npos) return argv0;
  bool found_not_executable = false;
  for (const std::string& dir : detail::path_directories(path_list)) {
    std::string candidate = dir + "/" + argv0;
    struct stat st{};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
      found_not_executable = true;
    }
  }
  error = found_not_executable ? EACCES : ENOENT;
  return std::nullopt;
}

namespace detail {

std::vector<std::string> path_directories(const std::string& path_list) {
  std::vector<std::string> dirs;
  std::size_t start = 0;
  while (start <= path_list.size()) {
    std::size_t end = path_list.find(':', start);
    if (end == std::string::npos) end = path_list.size();
    std::string dir = path_list.substr(start, end - start);
    dirs.push_back(dir.empty() ? std::string(".") : dir);
    start = end + 1;
  }
  return dirs;
}

bool is_executable_file(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

namespace {

// Names longer than this are never compared (no command is that long, and
// the distance table stays small).
constexpr std::size_t longest_name = 255;

}  // namespace

std::vector<std::string> similar_commands(const std::string& name, const std::string& path_list, std::size_t count) {
  constexpr std::size_t max_distance = 2;
  struct Candidate {
    std::size_t distance;
    std::size_t dir;  // index in PATH: the one execvp would run
    std::string name;
  };
  std::vector<Candidate> found;
  std::set<std::string> seen;
  if (name.empty() || name.size() > longest_name || name.find('/') != std::string::npos) return {};
  const std::vector<std::string> dirs = path_directories(path_list);
  for (std::size_t d = 0; d < dirs.size(); ++d) {
    const std::string& dir = dirs[d];
    std::unique_ptr<DIR, int (*)(DIR*)> listing(::opendir(dir.c_str()), ::closedir);
    if (!listing) continue;  // missing or unreadable: execvp skips it too
    while (const dirent* entry = ::readdir(listing.get())) {
      const std::string_view candidate = entry->d_name;
      if (candidate.size() > longest_name || candidate == name || candidate.front() == '.') continue;
      const std::size_t distance = edit_distance(name, candidate, max_distance);
      if (distance > max_distance || seen.count(std::string(candidate)) != 0) continue;
      if (!is_executable_file(dir + "/" + std::string(candidate))) continue;
      seen.emplace(candidate);
      found.push_back({distance, d, std::string(candidate)});
    }
  }
  std::sort(found.begin(), found.end(), [](const Candidate& x, const Candidate& y) {
    if (x.distance != y.distance) return x.distance < y.distance;
    return x.dir != y.dir ? x.dir < y.dir : x.name < y.name;
  });
  std::vector<std::string> names;
  for (std::size_t i = 0; i < found.size() && i < count; ++i) names.push_back(found[i].name);
  return names;
}

std::size_t path_directory_count(const std::string& path_list) { return path_directories(path_list).size(); }

std::string abbreviated_path(const std::string& path_list) {
  constexpr std::size_t shown = path_directories_shown;
  const std::vector<std::string> dirs = path_directories(path_list);
  if (dirs.size() <= shown + 1) return fmt::format("{}", fmt::join(dirs, ", "));
  return fmt::format("{} and {} more directories",
                     fmt::join(dirs.begin(), dirs.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
                     dirs.size() - shown);
}

std::string command_lookup_message(int rank, const std::string& name, const std::string& path_list, int error) {
  if (error != ENOENT) {
    return fmt::format("{}: cannot run '{}': found in PATH but {} ({})", process_name(ProcessRole::rank, rank), name,
                       error == EACCES ? "not executable" : std::strerror(error), abbreviated_path(path_list));
  }
  std::string message = fmt::format("{}: cannot run '{}': command not found in PATH ({})",
                                    process_name(ProcessRole::rank, rank), name, abbreviated_path(path_list));
  const std::vector<std::string> similar = similar_commands(name, path_list);
  for (std::size_t i = 0; i < similar.size(); ++i) {
    message += i == 0 ? "; did you mean " : i + 1 == similar.size() ? " or " : ", ";
    message += "'" + similar[i] + "'";
  }
  if (!similar.empty()) message += "?";
  return message;
}

}  // namespace detail

}  // namespace davincirun
