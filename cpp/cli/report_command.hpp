// `davincirun report [RUN_DIR | JOB_ID]`: a finished job's report page
// (report.hpp) written next to its record, and its summary printed.
#pragma once

#include <string>

namespace davincirun::cli {

/// Whether the command line asks for the report rather than a launch: its
/// first argument is exactly "report", followed by nothing, or by one
/// argument that is an existing directory, or that does not exist and is
/// spelled as a job id (letters, digits, '-', '_'). Anything else launches
/// as always: `davincirun report.py`, `davincirun report --epochs 3`,
/// `davincirun report data.txt` (an existing file); `davincirun -- report`
/// or `./report` launches a program named report with no arguments.
bool is_report_command(int argc, char** argv);

/// Runs it: finds the run directory (the argument; none: `<log dir>/latest`,
/// the launcher's default log dir; a job id: the newest run directory of
/// the log dir named `<job id>` or `...-<job id>`), reads `<run>/job.json`,
/// writes `<run>/report.html`, prints its path and the summary on stdout.
/// Returns the exit status: 0, or 1 with a message on stderr naming the
/// path when the run or its record cannot be found or read.
int run_report_command(int argc, char** argv);

/// The part of `davincirun --help` about the report.
std::string report_usage();

}  // namespace davincirun::cli
