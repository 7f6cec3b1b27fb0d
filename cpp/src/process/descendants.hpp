// Finding and ending every process below this one. Used by a process that
// made itself a child subreaper (PR_SET_CHILD_SUBREAPER): then a descendant
// that double-forked and called setsid() is re-parented to it instead of to
// init, so "everything below me" really is everything the job started.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace davincirun::detail {

/// Live (not zombie) processes whose parent chain leads to `root`, found by
/// reading the parent pid of every process in /proc. A snapshot: processes
/// may start or end meanwhile.
std::vector<pid_t> live_descendants(pid_t root);

/// SIGKILLs every live descendant of this process and reaps this process's
/// zombie children, again and again until none is left (a process forking
/// during a pass is caught by the next) or `budget` is spent. Only for a
/// process that owns all its children: it reaps with waitpid(-1).
/// Returns how many distinct processes it signalled, not counting those in
/// `known_groups` (process groups already SIGKILLed as a whole, whose
/// members may still be dying).
std::size_t kill_all_descendants(std::chrono::milliseconds budget, const std::vector<pid_t>& known_groups = {});

/// SIGKILLs every process of this user whose environment holds `entry`
/// exactly (e.g. "DAVINCIRUN_JOB_TAG=<tag>"), again and again until none is
/// left or `budget` is spent: the launcher's last resort when the job's
/// supervisor process died without cleaning up, and the final sweep's way to
/// what a rank detached when this process is not a child subreaper. Returns
/// how many it signalled, not counting those in `known_groups` (as above).
std::size_t kill_tagged_processes(const std::string& entry, std::chrono::milliseconds budget,
                                  const std::vector<pid_t>& known_groups = {});

/// Makes this process a child subreaper (PR_SET_CHILD_SUBREAPER, Linux 3.4).
/// Returns 0, or the errno of the refusal: qemu-user 7.2 does not emulate it
/// (EINVAL), and a seccomp filter may refuse it (EPERM, ENOSYS, EINVAL).
int become_child_subreaper() noexcept;

/// Whether this process is a child subreaper (PR_GET_CHILD_SUBREAPER); false
/// when the kernel refuses to say (qemu-user 7.2: EINVAL).
bool is_child_subreaper() noexcept;

/// Reaps every zombie child of this process without blocking (waitpid(-1));
/// for a process that owns all its children. Returns how many it reaped.
std::size_t reap_zombie_children();

}  // namespace davincirun::detail
