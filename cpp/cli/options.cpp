#include "options.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "davincirun/errors.hpp"

namespace davincirun::cli {

std::string usage_text() {
  return fmt::format(
             R"(Usage: davincirun [OPTIONS] [--] COMMAND [ARGS...]
       davincirun --write-rank-table FILE | --merge-rank-tables OUT IN...

Starts COMMAND once per device of this machine's server in an HCCL rank table,
with RANK_ID, RANK_SIZE, DEVICE_ID, ASCEND_DEVICE_ID, RANK_TABLE_FILE, JOB_ID,
RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT... set for each rank.
Every rank's output goes to its own log file and, prefixed by its rank, to
this terminal. When one rank fails, the others are stopped at once.
A COMMAND that is a Python script without execute permission (train.py)
runs with the Python that installed davincirun.

Options (they end at the first non-option or at --):
  -r, --rank-table PATH    rank table file, or a directory holding
                           jobstart_hccl.json or hccl.json (default:
                           $RANK_TABLE_FILE_V_1_0, else $RANK_TABLE_FILE)
      --launch-mode MODE   rank-table (default): each rank reads the table;
                           dynamic-cluster: MindSpore's dynamic cluster, as
                           msrun starts it: the ranks as workers plus a
                           scheduler ([sched], scheduler.log) on the server
                           of rank 0 (docs/mindspore.md)
      --nproc N            no rank table: N ranks on this machine
      --devices LIST       only these devices (physical ids, e.g. 0,1) of a
                           one-server table; without a table, the devices of
                           the ranks on this machine
      --wait-timeout SEC   how long to wait for a rank table the platform is
                           still writing (default: 300; 0: do not wait); a
                           path whose folder does not exist fails at once
  -l, --log-dir DIR        directory for run logs (default: /cache/davincirun/log
                           when /cache is writable, else ./log); each run
                           gets a new subdirectory, DIR/latest points to it
  -w, --work-dir DIR       working directory of the ranks (default: .)
      --server-id ID       this machine's server_id in the table (needed when
                           the table lists several servers)
      --grace-period SEC   seconds between SIGTERM and SIGKILL when stopping
                           ranks (default: {:g})
      --job-timeout SEC    stop every rank once the job has run this long
                           (default and 0: no limit; exit status 124)
      --peer-timeout SEC   several servers: stop the job when another server's
                           agent is silent this long (default: 30)
      --peer-port PORT     several servers: the port the agent of rank 0's
                           server listens on (default: $DAVINCIRUN_PEER_PORT,
                           else derived from the table, alike on every server)
      --no-peers           several servers: each server's job on its own, no
                           job-wide stop (docs/multi-server.md)
      --stall-timeout SEC  stop the job when no rank of it wrote any output
                           this long, after dumping Python stacks with py-spy
                           (default and 0: no watchdog; exit status 124)
      --env NAME=VALUE     set a variable for every rank (repeatable); it wins
                           over inherited values, not over the rank identity
      --ranks-to-show LIST show only these ranks' output live, e.g. 0 or 0,4
                           (default: all); every rank still gets its log file
      --dry-run            print each rank's device and environment (what
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

A job locks its devices in $DAVINCIRUN_LOCK_DIR (default /tmp/davincirun-locks;
"off": no locking): one started on a device another job uses fails at once.

Exit status: 0 when every rank exited 0; else the first failed rank's exit
code, or 128+N when it was killed by signal N; 128+N when davincirun itself
was stopped by signal N (130 SIGINT, 143 SIGTERM, 129 SIGHUP, 131 SIGQUIT);
124 when --job-timeout or --stall-timeout stopped the job; when another
server stopped it, that server's failed rank's code (1 when an agent was
lost or the job was stopped there); 2 for a usage, configuration or
rank-table error or a device in use; 126/127 when the command cannot be
executed / is not found. A rank's own exit code
can take these values too: the messages on standard error say which it was.
)",
             std::chrono::duration<double>(default_grace_period).count()) +
         table_tools_usage();
}

namespace {

// "0" or "0,4,7": rank ids, decimal, comma-separated.
std::vector<int> parse_rank_list(std::string_view option, const std::string& text) {
  std::vector<int> ranks;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    char* end = nullptr;
    errno = 0;
    const long rank = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno != 0 || rank < 0 || rank > 1'000'000 ||
        item.find_first_not_of("0123456789") != std::string::npos) {
      throw UsageError(fmt::format("{} expects {} separated by commas, e.g. 0,4; got '{}'", option,
                                   option == "--ranks-to-show" ? "rank ids" : "device ids", text));
    }
    ranks.push_back(static_cast<int>(rank));
    start = comma + 1;
  }
  return ranks;
}

// A duration flag: its value read as seconds, its range checked by the
// option's own rule (LaunchOptions::set_seconds; main() names the flag in its
// OptionError).
void set_seconds(LaunchOptions& options, std::string_view flag, const std::string& text) {
  // Decimal only: strtod alone would also take " 5", "0x10" (hex) and "infinity".
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || text.find_first_not_of("0123456789.eE+-") != std::string::npos) {
    throw UsageError(fmt::format("{} expects a number of seconds, got '{}'", flag, text));
  }
  std::string name(flag.substr(2));  // "--grace-period" -> "grace_period"
  std::replace(name.begin(), name.end(), '-', '_');
  options.set_seconds(name, seconds);
}

}  // namespace

std::string flag_message(const OptionError& error) {
  // The options a flag sets, named by their flag wherever the core's message names them.
  static constexpr std::string_view flagged[] = {"rank_table",   "log_dir",     "work_dir",     "server_id",
                                                 "grace_period", "job_timeout", "wait_timeout", "ranks_to_show",
                                                 "env",          "launch_mode", "nproc",        "devices",
                                                 "peer_timeout", "peer_port",   "stall_timeout"};
  const std::string& option = error.option();
  if (std::find(std::begin(flagged), std::end(flagged), option) == std::end(flagged)) return error.what();
  std::string flag = "--" + option;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return error.message_naming(flag);
}

CliOptions parse_command_line(int argc, char** argv) {
  CliOptions out;
  int i = 1;
  auto value_of = [&](std::string_view option, std::string_view arg) -> std::string {
    // Both "--opt value" and "--opt=value".
    auto eq = arg.find('=');
    if (arg.substr(0, 2) == "--" && eq != std::string_view::npos) return std::string(arg.substr(eq + 1));
    if (i + 1 >= argc) throw UsageError(fmt::format("{} needs a value", option));
    return argv[++i];
  };
  for (; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-' || arg == "-") break;  // the command starts here
    // Long options take "--name=value"; a short option is exactly "-x".
    std::string_view name = arg.substr(0, 2) == "--" ? arg.substr(0, arg.find('=')) : arg;
    if (name == "-h" || name == "--help") {
      out.help = true;
    } else if (name == "-V" || name == "--version") {
      out.version = true;
    } else if (name == "-r" || name == "--rank-table") {
      out.launch.rank_table = value_of(name, arg);
    } else if (name == "-l" || name == "--log-dir") {
      out.launch.log_dir = value_of(name, arg);
    } else if (name == "-w" || name == "--work-dir") {
      out.launch.work_dir = value_of(name, arg);
    } else if (name == "--server-id") {
      out.launch.server_id = value_of(name, arg);
    } else if (name == "--grace-period" || name == "--job-timeout" || name == "--wait-timeout" ||
               name == "--peer-timeout" || name == "--stall-timeout") {
      set_seconds(out.launch, name, value_of(name, arg));
    } else if (name == "--ranks-to-show") {
      out.launch.ranks_to_show = parse_rank_list(name, value_of(name, arg));
    } else if (name == "--launch-mode") {
      out.launch.launch_mode = parse_launch_mode(value_of(name, arg));
    } else if (name == "--nproc") {
      const std::string text = value_of(name, arg);
      if (text.empty() || text.size() > 7 || text.find_first_not_of("0123456789") != std::string::npos) {
        throw UsageError(fmt::format("--nproc expects a number of ranks, e.g. 2; got '{}'", text));
      }
      out.launch.nproc = std::stoi(text);  // its range is the option's rule (1..max_nproc)
    } else if (name == "--devices") {
      out.launch.devices = parse_rank_list(name, value_of(name, arg));
    } else if (name == "--no-peers") {
      out.launch.peers = false;
    } else if (name == "--peer-port") {
      const std::string text = value_of(name, arg);
      if (text.empty() || text.size() > 5 || text.find_first_not_of("0123456789") != std::string::npos) {
        throw UsageError(fmt::format("--peer-port expects a TCP port number, e.g. 29600; got '{}'", text));
      }
      out.launch.peer_port = std::stoi(text);  // its range is the option's rule (1..65535)
    } else if (is_table_tool_flag(name)) {
      set_table_tool_flag(out.tables, name, value_of(name, arg));
    } else if (name == "--dry-run") {
      out.dry_run = true;
    } else if (name == "-q" || name == "--quiet") {
      if (out.verbosity == 2) throw UsageError("-q (quiet) and -v (verbose) contradict each other; give one");
      out.verbosity = 0;
    } else if (name == "-v" || name == "--verbose") {
      if (out.verbosity == 0) throw UsageError("-q (quiet) and -v (verbose) contradict each other; give one");
      out.verbosity = 2;
    } else if (name == "--env") {
      std::string kv = value_of(name, arg);
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        throw UsageError(fmt::format("--env expects NAME=VALUE, got '{}'", kv));
      }
      out.launch.env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    } else {
      throw UsageError(fmt::format("unknown option '{}' (see davincirun --help)", arg));
    }
  }
  for (; i < argc; ++i) out.launch.command.emplace_back(argv[i]);
  if (!out.help && !out.version && !out.tables.active() && out.launch.command.empty()) {
    throw UsageError("no command given (see davincirun --help)");
  }
  return out;
}

}  // namespace davincirun::cli
