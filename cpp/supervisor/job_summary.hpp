// The machine-readable record of a finished job: <run dir>/summary.json.
#pragma once

#include <string>

#include "job/job_protocol.hpp"

namespace davincirun::detail {

/// Writes the summary of `result` for `spec` to `path` (new file, mode 0600,
/// never through a symlink). Throws SystemError.
void write_job_summary(const std::string& path, const JobSpec& spec, const std::string& table_copy,
                       const JobResult& result);

}  // namespace davincirun::detail
