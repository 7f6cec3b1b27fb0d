// `davincirun --write-rank-table FILE` and `--merge-rank-tables OUT IN...`:
// rank tables made rather than launched (machine_rank_table.hpp,
// rank_table_merge.hpp).
#pragma once

#include <string>
#include <string_view>

namespace davincirun::cli {

struct CliOptions;

/// Which table tool the command line asks for, and its own flags.
struct TableTool {
  enum class Kind { none, write, merge };
  Kind kind = Kind::none;
  std::string output;       ///< the FILE / OUT argument
  std::string system_root;  ///< --system-root (not in --help: for tests and containers); empty: "/"
  bool active() const noexcept { return kind != Kind::none; }
};

/// Whether `flag` is one of the table tools' flags: --write-rank-table,
/// --merge-rank-tables, --system-root.
bool is_table_tool_flag(std::string_view flag);

/// Records `flag` and its value. Throws UsageError when both tools are asked for.
void set_table_tool_flag(TableTool& tool, std::string_view flag, std::string value);

/// Runs the tool `cli.tables` names: checks the rest of the command line
/// (the positional arguments are the tables to merge, and nothing for
/// --write-rank-table), makes, validates and writes the table, and says on
/// stderr what it wrote (and its warnings). Returns the exit status (0);
/// throws UsageError, OptionError, ConfigError, RankTableError, SystemError.
int run_table_tool(const CliOptions& cli);

/// The part of `davincirun --help` about the table tools.
std::string table_tools_usage();

}  // namespace davincirun::cli
