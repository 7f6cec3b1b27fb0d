// Command-line options of `davincirun`.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "davincirun/errors.hpp"
#include "davincirun/plan.hpp"
#include "table_tools.hpp"

namespace davincirun::cli {

/// A command line that cannot be understood; `davincirun` exits 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CliOptions {
  LaunchOptions launch;
  bool help = false;
  bool version = false;
  bool dry_run = false;  ///< print each rank's assignment and environment, start nothing
  int verbosity = 1;     ///< 0 quiet (errors only), 1 normal, 2 verbose
  TableTool tables;      ///< --write-rank-table / --merge-rank-tables: no launch
  /// Information lines about the command line (another launcher's flag taken as ours).
  std::vector<std::string> notes;
};

/// Parses argv. Options end at the first argument that is not an option, or
/// at "--"; everything after is the command (the tables to merge for
/// --merge-rank-tables). Throws UsageError.
CliOptions parse_command_line(int argc, char** argv);

/// An option's error in the words of the command line: where the core's
/// message names the option ("work_dir '/x' cannot be used", "... or give
/// rank_table"), it names its flag instead ("--work-dir '/x' cannot be
/// used", "... or give --rank-table").
std::string flag_message(const OptionError& error);

/// The text of `davincirun --help`.
std::string usage_text();

}  // namespace davincirun::cli
