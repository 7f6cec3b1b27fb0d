// A failed job told to people: which rank failed first, how, and its last words.
#pragma once

#include <cstddef>
#include <string>

#include "davincirun/supervisor.hpp"

namespace davincirun {

/// A plain-text account of a failed job: the first failed rank, how it
/// ended, its log file and what its log says: when read_root_cause() finds
/// a root cause there (a Python traceback, CANN error codes, MindSpore's
/// error sections), "root cause, from its log:" and that block, whose last
/// lines are min(`tail_lines`, RootCauseLimits::default_tail_lines) (5);
/// else "last lines of its log:" and the last `tail_lines` lines of that
/// log (as a terminal shows them; read_log_tail()). Then one line per other rank
/// ("rank 3 (pid 123): stopped by the launcher (SIGTERM)"), or one line per
/// outcome shared by more than 4 ranks ("31 ranks (0, 2-31): stopped by the
/// launcher (SIGTERM)"); then each log file that could not take every byte.
/// Without a failed rank, it says why the job stopped (a request, the job
/// timeout, a signal). Empty when `result.success()`.
std::string failure_report(const JobResult& result, std::size_t tail_lines = 20);

}  // namespace davincirun
