// The stall watchdog's evidence: each rank's Python stacks, by py-spy.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace davincirun::detail {

/// Runs `py-spy dump --pid P` (py-spy, from PyPI, found on this process's
/// PATH) for every process at once, each writing to `<dir>/<label>.stacks.txt`
/// ("rank_3.stacks.txt"), and waits at most 10 s for them all. Returns one
/// sentence for the console: where the stacks are, or why there are none
/// (py-spy missing; ptrace refused, as yama's ptrace_scope 1 does for a
/// non-root user). Never throws.
std::string dump_python_stacks(const std::vector<pid_t>& pids, const std::vector<std::string>& labels,
                               const std::string& dir);

}  // namespace davincirun::detail
