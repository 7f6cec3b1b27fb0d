// When a job restarts (SupervisorOptions::max_restarts): the rule the
// supervisor's judge applies to every attempt that is over, and the test
// for a failure that repeats (docs/restarts.md has the rule and its reasons).
//
// An attempt is restarted when all of these hold:
//  - it failed: a rank (or the scheduler) failed, or the stall watchdog
//    stopped it (restarts_after() in lifecycle.hpp);
//  - nothing during it rules a restart out: a person's stop, an engine's
//    signal, the launcher's death or the job timeout, even one that came
//    while the failure's stop was under way;
//  - restarts are left: it is attempt k and k <= max_restarts;
//  - it did not fail as the attempt before it did (unless
//    restart_on_same_error): its first failed process failed alike (the
//    same exit status and root cause line) in the attempt before, or that
//    attempt's first failure did, and its log holds not one line that the
//    log of that failure did not (wrote_nothing_new()). Either process
//    counts because when every rank fails the same way, which one is first
//    is chance, and the first now may have been stopped by us then. A bug
//    that fails the same way every time would burn every restart for
//    nothing.
#pragma once

#include <string>

#include "davincirun/job_types.hpp"
#include "davincirun/supervisor.hpp"
#include "davincirun/supervisor_options.hpp"

namespace davincirun {

/// Bytes read from the end of each of the two logs repeats_failure()
/// compares: 32 MiB. Older lines count as not written.
inline constexpr std::size_t repeat_read_bytes = std::size_t{32} << 20;

/// The verdict on the last entry of `attempt.attempts` (the attempt that is
/// over; the entries before it are the earlier attempts), given
/// `ruled_out_by` (the words of an event that rules a restart out, or "")
/// and the job's `options`. Reads the failed process's torch error file
/// and log for the root cause (rank_root_cause()). Never throws but
/// std::bad_alloc.
AttemptVerdict judge_attempt(const JobResult& attempt, const std::string& ruled_out_by,
                             const SupervisorOptions& options);

/// JobAttempt::decision of attempt `attempt` when it is restarted:
/// "restarted (1 of 3 restarts)".
std::string restarted_decision(int attempt, int max_restarts);
/// JobAttempt::decision once every restart is used:
/// "not restarted: no restarts left (max_restarts 3)".
std::string no_restarts_left_decision(int max_restarts);

/// Whether the log at `now` holds no line that the log at `before` does not
/// (each read up to repeat_read_bytes from its end), lines compared with
/// what changes from run to run masked: runs of digits joined by '.', ':',
/// '-' or '/' (times, dates, decimals, addresses) and hexadecimal numbers
/// after "0x". A line "epoch 3" is new after a log that ended at "epoch 2";
/// "loss 0.6931" is not new after "loss 0.7012". A log that cannot be read
/// counts as holding new lines (so the job restarts).
bool wrote_nothing_new(const std::string& before, const std::string& now);

}  // namespace davincirun
