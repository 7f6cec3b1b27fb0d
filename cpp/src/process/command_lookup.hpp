// A command in PATH: where find_executable() (process.hpp) finds it, and
// what a rank's start-up says when it is not there: the directories
// searched, shortened, and the commands of a similar name that are there
// ("did you mean 'python3'?").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/edit_distance.hpp"

namespace davincirun::detail {

/// The directories of `path_list` (a PATH value) in order, an empty entry
/// as ".": the current directory, as execvp reads it.
std::vector<std::string> path_directories(const std::string& path_list);

/// `path` is a regular file (after symlinks) this process may execute.
bool is_executable_file(const std::string& path);

/// Up to `count` executables in the directories of `path_list` (a PATH
/// value) whose names are at most 2 edits from `name`: the nearest first,
/// then in PATH order. "pyhton" finds "python"; "python" where only
/// "python3" exists finds "python3".
std::vector<std::string> similar_commands(const std::string& name, const std::string& path_list, std::size_t count = 3);

/// How many directories of PATH a message names, at most, before "and N more".
inline constexpr std::size_t path_directories_shown = 3;

/// The directories of `path_list` for a message: all of them when there
/// are at most path_directories_shown + 1, else the first ones and how many
/// more ("/usr/local/bin, /usr/bin, /bin and 9 more directories"). An empty
/// entry is the current directory, as execvp reads it.
std::string abbreviated_path(const std::string& path_list);

/// The number of directories in `path_list` (a PATH value).
std::size_t path_directory_count(const std::string& path_list);

/// The SpawnError message of rank `rank`, whose command `name` could not be
/// run from `path_list`: `error` ENOENT (not found) or EACCES (found, not
/// executable), e.g. "rank 0: cannot run 'pyhton': command not found in
/// PATH (/usr/local/bin, /usr/bin, /bin); did you mean 'python'?".
std::string command_lookup_message(int rank, const std::string& name, const std::string& path_list, int error);

}  // namespace davincirun::detail
