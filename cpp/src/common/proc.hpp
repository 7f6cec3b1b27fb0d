// What /proc says of a process: its parent and state, for finding a job's
// descendants and telling a caller whether a process is its child; its
// command name, for messages; and this process's command line renamed.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace davincirun::detail {

/// The fields of /proc/<pid>/stat the launcher uses.
struct ProcStat {
  pid_t ppid = 0;
  char state = '?';  ///< 'R', 'S', 'D', 'Z' (zombie), 'X' (dead), ...
  bool zombie() const noexcept { return state == 'Z' || state == 'X'; }
};

/// Parses /proc/<pid>/stat ("pid (comm) S ppid ..."; comm may hold spaces
/// and parentheses, so fields are read after the last ')'). nullopt when the
/// process does not exist or the file cannot be read or parsed.
std::optional<ProcStat> read_proc_stat(pid_t pid);

/// The command name of `pid` (/proc/<pid>/comm, control characters made
/// printable); empty when the process is gone or the file cannot be read.
std::string command_name(pid_t pid);

/// The pids /proc lists right now (a snapshot).
std::vector<pid_t> list_processes();

/// Calls visit(pid, stat) for every process /proc lists and can describe.
template <typename Visit>
void for_each_process(Visit&& visit) {
  for (const pid_t pid : list_processes()) {
    if (const auto stat = read_proc_stat(pid)) visit(pid, *stat);
  }
}

/// Writes `name` over this process's argument strings, NUL-filled to their
/// end: what `ps -f`, `ps aux` and `pgrep -f` show (/proc/<pid>/cmdline),
/// which a fork would otherwise share with its parent. A name longer than
/// the strings were is cut; nothing changes when /proc/self/stat cannot be read.
void rename_command_line(const char* name) noexcept;

}  // namespace davincirun::detail
