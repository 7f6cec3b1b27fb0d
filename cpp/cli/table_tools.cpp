#include "table_tools.hpp"

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "davincirun/machine_rank_table.hpp"
#include "davincirun/rank_table_merge.hpp"
#include "options.hpp"

namespace davincirun::cli {

namespace {

void say(const std::string& text) {
  const std::string line = "davincirun: " + text + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

// "0-7", or "3" for one rank.
std::string rank_range(int first, int count) {
  return count == 1 ? std::to_string(first) : fmt::format("{}-{}", first, first + count - 1);
}

int write_machine_table(const CliOptions& cli) {
  if (!cli.launch.command.empty()) {
    throw UsageError(fmt::format("--write-rank-table takes no command or other file, got '{}'", cli.launch.command[0]));
  }
  MachineRankTableOptions options;
  options.server_id = cli.launch.server_id;
  options.devices = cli.launch.devices;
  if (!cli.tables.system_root.empty()) options.system_root = cli.tables.system_root;
  const MachineRankTable made = machine_rank_table(options);
  write_rank_table_file(made.table, cli.tables.output);
  for (const auto& warning : made.warnings) say("warning: " + warning);
  if (cli.verbosity >= 1) {
    const RankTableServer& server = made.table.servers.front();
    std::vector<int> ids;
    for (const auto& device : server.devices) ids.push_back(device.device_id);
    say(fmt::format("wrote rank table {}: server {} ({}), devices {} as ranks {}", cli.tables.output, server.server_id,
                    made.server_reason, fmt::join(ids, ","), rank_range(0, made.table.world_size)));
  }
  return 0;
}

int merge_tables(const CliOptions& cli) {
  const std::vector<std::string>& inputs = cli.launch.command;  // the positional arguments
  if (inputs.empty()) {
    throw UsageError("--merge-rank-tables needs the tables to merge: davincirun --merge-rank-tables OUT IN...");
  }
  const RankTable merged = merge_rank_tables(inputs, cli.tables.output);
  write_rank_table_file(merged, cli.tables.output);
  if (cli.verbosity >= 1) {
    say(fmt::format("wrote rank table {}: {} server(s) from {} table(s), ranks {} in the order the tables were given",
                    cli.tables.output, merged.servers.size(), inputs.size(), rank_range(0, merged.world_size)));
  }
  if (cli.verbosity >= 2) {
    for (const auto& server : merged.servers) {
      say(fmt::format("server {}: ranks {}", server.server_id,
                      rank_range(server.rank_start, static_cast<int>(server.devices.size()))));
    }
  }
  return 0;
}

}  // namespace

bool is_table_tool_flag(std::string_view flag) {
  return flag == "--write-rank-table" || flag == "--merge-rank-tables" || flag == "--system-root";
}

void set_table_tool_flag(TableTool& tool, std::string_view flag, std::string value) {
  if (flag == "--system-root") {
    tool.system_root = std::move(value);
    return;
  }
  const TableTool::Kind kind = flag == "--write-rank-table" ? TableTool::Kind::write : TableTool::Kind::merge;
  if (tool.active() && tool.kind != kind) {
    throw UsageError("--write-rank-table and --merge-rank-tables are two commands: give one");
  }
  if (value.empty()) throw UsageError(fmt::format("{} needs a file name", flag));
  tool.kind = kind;
  tool.output = std::move(value);
}

int run_table_tool(const CliOptions& cli) {
  if (cli.tables.kind == TableTool::Kind::write) return write_machine_table(cli);
  return merge_tables(cli);
}

std::string table_tools_usage() {
  return R"(
Rank tables (written atomically, mode 0644, after validation):
  davincirun --write-rank-table FILE [--server-id ID] [--devices LIST]
      FILE: this machine's table (one server): its /dev/davinci<N>, their
      addresses from /etc/hccn.conf (address_<N>=...; a device without one
      is listed without device_ip, with a warning), ranks in device order;
      server_id: --server-id, else the address of the default route's
      interface, else the first IPv4 address of this machine
  davincirun --merge-rank-tables OUT IN...
      OUT: one table of the servers of every IN, in the order given, ranks
      renumbered consecutively (format 2.0 tables: one 2.0 table); a
      server_id or device_ip in two tables, or a device without device_ip
      (1.0), is refused
)";
}

}  // namespace davincirun::cli
