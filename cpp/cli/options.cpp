// The `davincirun` flags: one per launch option that has one in the option
// list (plan.hpp, supervisor_options.hpp), read by the option's type; then
// the command line's own (--dry-run, -q, -v, the table tools).
#include "options.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/edit_distance.hpp"
#include "davincirun/errors.hpp"
#include "foreign_flags.hpp"
#include "report_command.hpp"

namespace davincirun::cli {

namespace {

constexpr const char* usage_head = R"(Usage: davincirun [OPTIONS] [--] COMMAND [ARGS...]
       davincirun --write-rank-table FILE | --merge-rank-tables OUT IN...
       davincirun report [RUN_DIR | JOB_ID]

Starts COMMAND once per device of this machine's server in an HCCL rank table,
with RANK_ID, RANK_SIZE, DEVICE_ID, ASCEND_DEVICE_ID, RANK_TABLE_FILE, JOB_ID,
RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT... set for each rank.
Every rank's output goes to its own log file and, prefixed by its rank, to
this terminal. When one rank fails, the others are stopped at once.
A COMMAND that is a Python script without execute permission (train.py)
runs with the Python that installed davincirun.

Options (they end at the first non-option or at --):
)";

constexpr const char* usage_tail = R"(      --dry-run            print each rank's device and environment (what
                           differs from this shell's), start nothing; exit 2
                           if another job holds any of the devices
  -q, --quiet              print only errors from davincirun itself
  -v, --verbose            also print each rank's assignment at start
  -h, --help               show this help and exit
  -V, --version            show the version and exit

Signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT stop every rank (SIGTERM, then
SIGKILL after the grace period); a second Ctrl-C (SIGINT) kills at once, while
more SIGTERMs (an engine such as srun signals every process) keep the grace
period; they are answered while waiting for the rank table too. A SIGHUP
ignored when davincirun started (nohup) stays ignored; SIGINT always stops,
even when ignored at start (a script's davincirun ... &).
SIGUSR1 and SIGUSR2 are forwarded to every rank.

The flags of msrun and torchrun that have a meaning here are taken as ours
(--nproc_per_node, --local_worker_num, --log_dir, --cluster_time_out...); the
others (--master_addr, --node_rank...) are refused naming what does their work.

A job locks its devices in $DAVINCIRUN_LOCK_DIR (default /tmp/davincirun-locks,
unused on a machine without NPUs; "off": no locking): one started on a device
another job uses fails at once.

Exit status: 0 when every rank exited 0; else the first failed rank's exit
code, or 128+N when it was killed by signal N; 128+N when davincirun itself
was stopped by signal N (130 SIGINT, 143 SIGTERM, 129 SIGHUP, 131 SIGQUIT);
124 when --job-timeout or --stall-timeout stopped the job; when another
server stopped it, that server's failed rank's code (1 when an agent was
lost or the job was stopped there); 2 for a usage, configuration or
rank-table error or a device in use; 126/127 when the command cannot be
executed / is not found. A rank's own exit code
can take these values too: the messages on standard error say which it was.
)";

constexpr std::size_t help_column = 27;  // where a flag's help starts
constexpr std::size_t help_width = 79;

// The long flag of an option: --grace-period; a bool that is on by default
// is turned off: --no-peers.
template <typename Option>
std::string long_flag(const Option& option) {
  std::string flag = option.name;
  std::replace(flag.begin(), flag.end(), '_', '-');
  if constexpr (std::is_same_v<typename Option::Member, bool>) {
    static const LaunchOptions defaults;
    if (option.of(defaults)) return "--no-" + flag;
  }
  return "--" + flag;
}

// One flag's lines of --help: "  -r, --rank-table PATH    <help, wrapped>".
template <typename Option>
std::string help_lines(const Option& option) {
  std::string out = option.short_flag != 0 ? fmt::format("  -{}, ", option.short_flag) : std::string(6, ' ');
  out += long_flag(option);
  if (*option.metavar != '\0') out += fmt::format(" {}", option.metavar);
  std::size_t column = out.size() + 1;
  out.resize(std::max(help_column, column), ' ');
  column = out.size();
  const std::string text = option_text(option);
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find(' ', pos);
    if (end == std::string::npos) end = text.size();
    const std::size_t word = end - pos;
    if (column > help_column && column + 1 + word > help_width) {
      out += "\n" + std::string(help_column, ' ');
      column = help_column;
    } else if (column > help_column) {
      out += ' ';
      ++column;
    }
    out.append(text, pos, word);
    column += word;
    pos = end + 1;
  }
  return out + "\n";
}

// "0" or "0,4,7": rank or device ids, decimal, comma-separated.
std::vector<int> parse_id_list(std::string_view flag, const char* what, const std::string& text) {
  std::vector<int> ids;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    char* end = nullptr;
    errno = 0;
    const long id = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno != 0 || id < 0 || id > 1'000'000 ||
        item.find_first_not_of("0123456789") != std::string::npos) {
      throw UsageError(fmt::format("{} expects {} separated by commas, e.g. 0,4; got '{}'", flag, what, text));
    }
    ids.push_back(static_cast<int>(id));
    start = comma + 1;
  }
  return ids;
}

// A duration flag: its value read as seconds, its range checked by the
// option's own rule (LaunchOptions::set_seconds; main() names the flag in its
// OptionError).
void set_seconds(LaunchOptions& options, std::string_view flag, std::string_view name, const std::string& text) {
  // Decimal only: strtod alone would also take " 5", "0x10" (hex) and "infinity".
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || text.find_first_not_of("0123456789.eE+-") != std::string::npos) {
    throw UsageError(fmt::format("{} expects a number of seconds, got '{}'", flag, text));
  }
  options.set_seconds(name, seconds);
}

// A whole number; its range is the option's rule (validate()).
int parse_number(std::string_view flag, const char* what, const std::string& text) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) {
    throw UsageError(fmt::format("{} expects {}; got '{}'", flag, what != nullptr ? what : "a number", text));
  }
  return std::stoi(text);
}

// Sets `option` from its flag; `value()` gives the flag's value.
template <typename Option, typename Value>
void set_option(LaunchOptions& options, const Option& option, std::string_view flag, Value&& value) {
  using M = typename Option::Member;
  M& member = option.of(options);
  if constexpr (std::is_same_v<M, bool>) {
    static const LaunchOptions defaults;
    member = !option.of(defaults);
  } else if constexpr (std::is_same_v<M, std::chrono::milliseconds>) {
    set_seconds(options, flag, option.name, value());
  } else if constexpr (std::is_same_v<M, std::string> || std::is_same_v<M, std::optional<std::string>>) {
    member = value();
  } else if constexpr (std::is_same_v<M, int> || std::is_same_v<M, std::optional<int>>) {
    member = parse_number(flag, option.expects, value());
  } else if constexpr (std::is_same_v<M, std::optional<std::vector<int>>>) {
    member = parse_id_list(flag, option.expects, value());
  } else if constexpr (std::is_enum_v<M>) {
    member = parse_choice<M>(option.name, value());
  } else if constexpr (std::is_same_v<M, std::vector<std::pair<std::string, std::string>>>) {
    const std::string kv = value();
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError(fmt::format("{} expects NAME=VALUE, got '{}'", flag, kv));
    member.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  } else {
    static_assert(sizeof(M) == 0, "no command-line flag for an option of this type");
  }
}

// Sets the option whose flag `name` is; false when no option has it.
template <typename Value>
bool set_flag(LaunchOptions& options, std::string_view name, Value&& value) {
  bool found = false;
  for_each_option<LaunchOptions, on_command_line>([&](const auto& option) {
    if (found) return;
    const bool short_match =
        option.short_flag != 0 && name.size() == 2 && name[0] == '-' && name[1] == option.short_flag;
    if (!short_match && name != long_flag(option)) return;
    found = true;
    set_option(options, option, name, value);
  });
  return found;
}

// Another launcher's flag: refused with what does its work here, or taken as
// ours with a note. msrun's --join takes a Python literal, True or False.
template <typename Value>
void take_foreign_flag(CliOptions& out, const ForeignFlag& foreign, int& i, int argc, char** argv, Value&& value) {
  if (foreign.ours.empty()) throw UsageError(refused_flag_message(foreign));
  if (foreign.ours == "-") {
    const bool inline_value = std::string_view(argv[i]).find('=') != std::string_view::npos;
    const std::string_view next = i + 1 < argc ? argv[i + 1] : "";
    if (!inline_value && (next == "True" || next == "False")) ++i;
  } else {
    set_flag(out.launch, foreign.ours, value);
  }
  out.notes.push_back(taken_flag_note(foreign));
}

// The flag a mistyped long option most likely meant ("--restart_delay":
// --restart-delay), or "" when none is close.
std::string closest_flag(std::string_view name) {
  if (name.substr(0, 2) != "--") return {};
  std::string dashed(name);
  std::replace(dashed.begin() + 2, dashed.end(), '_', '-');
  std::string best;
  std::size_t best_distance = 3;  // at most two edits away
  const auto consider = [&](const std::string& flag) {
    const std::size_t d = detail::edit_distance(dashed, flag, 2);
    if (d < best_distance) {
      best_distance = d;
      best = flag;
    }
  };
  for_each_option<LaunchOptions, on_command_line>([&](const auto& option) { consider(long_flag(option)); });
  for (const char* flag : {"--help", "--version", "--dry-run", "--quiet", "--verbose"}) consider(flag);
  return best;
}

}  // namespace

std::string usage_text() {
  std::string out = usage_head;
  for_each_option<LaunchOptions, on_command_line>([&](const auto& option) { out += help_lines(option); });
  return out + usage_tail + table_tools_usage() + report_usage();
}

std::string flag_message(const OptionError& error) {
  // Options that have a flag are named by it wherever the core's message names them.
  std::string flag;
  for_each_option<LaunchOptions, on_command_line>([&](const auto& option) {
    if (error.option() == option.name) flag = long_flag(option);
  });
  return flag.empty() ? error.what() : error.message_naming(flag);
}

CliOptions parse_command_line(int argc, char** argv) {
  CliOptions out;
  int i = 1;
  for (; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-' || arg == "-") break;  // the command starts here
    // Long options take "--name=value"; a short option is exactly "-x".
    std::string_view name = arg.substr(0, 2) == "--" ? arg.substr(0, arg.find('=')) : arg;
    auto value = [&]() -> std::string {
      // Both "--opt value" and "--opt=value".
      auto eq = arg.find('=');
      if (arg.substr(0, 2) == "--" && eq != std::string_view::npos) return std::string(arg.substr(eq + 1));
      if (i + 1 >= argc) throw UsageError(fmt::format("{} needs a value", name));
      return argv[++i];
    };
    if (set_flag(out.launch, name, value)) continue;
    if (name == "-h" || name == "--help") {
      out.help = true;
    } else if (name == "-V" || name == "--version") {
      out.version = true;
    } else if (is_table_tool_flag(name)) {
      set_table_tool_flag(out.tables, name, value());
    } else if (name == "--dry-run") {
      out.dry_run = true;
    } else if (name == "-q" || name == "--quiet") {
      if (out.verbosity == 2) throw UsageError("-q (quiet) and -v (verbose) contradict each other; give one");
      out.verbosity = 0;
    } else if (name == "-v" || name == "--verbose") {
      if (out.verbosity == 0) throw UsageError("-q (quiet) and -v (verbose) contradict each other; give one");
      out.verbosity = 2;
    } else if (const ForeignFlag* foreign = find_foreign_flag(name)) {
      take_foreign_flag(out, *foreign, i, argc, argv, value);
    } else {
      const std::string meant = closest_flag(name);
      throw UsageError(meant.empty()
                           ? fmt::format("unknown option '{}' (see davincirun --help)", arg)
                           : fmt::format("unknown option '{}'; did you mean {}? (see davincirun --help)", arg, meant));
    }
  }
  for (; i < argc; ++i) out.launch.command.emplace_back(argv[i]);
  if (!out.help && !out.version && !out.tables.active() && out.launch.command.empty()) {
    throw UsageError("no command given (see davincirun --help)");
  }
  return out;
}

}  // namespace davincirun::cli
