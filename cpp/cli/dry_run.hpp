// `davincirun --dry-run`: what would start, without starting it.
#pragma once

#include <string>
#include <vector>

#include "davincirun/environment.hpp"
#include "davincirun/plan.hpp"

namespace davincirun::cli {

/// The job's identity and `command` (shell-quoted), then per rank its devices, log file name and the
/// variables that differ from `inherited` (set, changed or removed).
std::string describe_plan(const LaunchPlan& plan, const std::vector<std::string>& command,
                          const Environment& inherited);

}  // namespace davincirun::cli
