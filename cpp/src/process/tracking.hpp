// Choosing how a Supervisor learns that its ranks exited (ProcessTracking),
// and the record of a fallback from pidfds to SIGCHLD.
#pragma once

#include <string>

#include "davincirun/supervisor.hpp"

namespace davincirun::detail {

/// The tracking `options` ask for, checked against this kernel: pidfd or
/// sigchld, never automatic. Throws ConfigError when it cannot work here.
ProcessTracking resolve_tracking(const SupervisorOptions& options);

/// Whether the supervisor may still fall back from `resolved` to sigchld
/// when clone() refuses CLONE_PIDFD: only for `automatic` in a process that
/// owns all its children (sigchld needs that).
bool may_fall_back_to_sigchld(const SupervisorOptions& options, ProcessTracking resolved) noexcept;

/// JobResult::tracking_fallback for a refusal with `error` (an errno).
std::string tracking_fallback_reason(int error);

}  // namespace davincirun::detail
