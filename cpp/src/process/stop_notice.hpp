// The words of a stop: which ranks still run, and when SIGKILL comes. The
// notice that starts a stop and the report on ranks that outlive SIGTERM
// are built here; the supervisor decides when they are due.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "davincirun/job_types.hpp"

namespace davincirun::detail {

/// How long after SIGTERM the ranks still running are named (when the grace
/// period is longer): long enough for a framework that handles SIGTERM to
/// be gone, short enough to tell a user waiting at the terminal.
inline constexpr std::chrono::milliseconds stop_report_delay{3'000};

/// A rank still running, by rank id and pid.
struct RunningRank {
  ProcessRole role;
  int rank;
  pid_t pid;
};

/// "rank 1 (pid 123), rank 3 (pid 456)": the first 8, then "and N more".
std::string describe_running(const std::vector<RunningRank>& ranks);

/// When SIGKILL comes: "SIGKILL in 7 s" (`left` rounded to 0.1 s; "SIGKILL
/// at once" for none), then ", or at once on a second Ctrl-C" when the
/// user's own stop (`request_name` "Ctrl-C") began it, ", or at once on
/// Ctrl-C" when something else did; nothing more when `request_name` is
/// empty (nobody is left to ask).
std::string kill_hint(std::chrono::milliseconds left, const std::string& request_name, bool user_stop);

}  // namespace davincirun::detail
