// Planning a launch: one options object in, everything decided before
// anything starts out (rank table → this server → devices → environments).
// A Job (job.hpp) then runs the plan.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "davincirun/device_allocation.hpp"
#include "davincirun/enum_names.hpp"
#include "davincirun/environment.hpp"
#include "davincirun/fields.hpp"
#include "davincirun/job_types.hpp"
#include "davincirun/platform_environment.hpp"
#include "davincirun/rank_table.hpp"
#include "davincirun/server_identity.hpp"
#include "davincirun/supervisor_options.hpp"

namespace davincirun {

/// Longest accepted wait for the rank table: one year, like the job
/// timeout (max_job_timeout).
inline constexpr std::chrono::milliseconds max_wait_timeout{365LL * 86'400'000};

/// Where jobs lock their devices unless told otherwise (the launcher's
/// DAVINCIRUN_LOCK_DIR variable, LaunchOptions::device_lock_dir; device_lock.hpp).
inline constexpr const char* default_device_lock_dir = "/tmp/davincirun-locks";

/// The mode of a text to_string() (environment.hpp) gives. Throws
/// OptionError("launch_mode") naming every mode for any other text.
LaunchMode parse_launch_mode(std::string_view text);

/// Most ranks --nproc may ask for on one machine.
inline constexpr int max_nproc = 1024;

/// Everything a launch can be asked to do. Every front end fills this one
/// object: the `davincirun` flags, the keywords of the Python functions
/// (same names, e.g. `grace_period` is `--grace-period`) and C++ callers.
/// Its rules live in validate(), which plan_launch() calls first.
struct LaunchOptions {
  /// The command every rank runs (argv; no shell). Required: at least a
  /// non-empty program; no argument may hold a NUL byte.
  std::vector<std::string> command;
  /// Rank table file, or a directory holding jobstart_hccl.json or hccl.json;
  /// empty (the default) = the environment's RANK_TABLE_FILE_V_1_0, else its
  /// RANK_TABLE_FILE (davincirunsdk 0.1.x's order); neither: NoRankTableError.
  std::string rank_table;
  /// How the ranks find each other. Default rank_table.
  LaunchMode launch_mode = LaunchMode::rank_table;
  /// No rank table (a debug machine): a one-server plan of this many ranks
  /// on this machine, 1..max_nproc, on the devices in `devices` when given
  /// (their number must then be `nproc`), else the first `nproc` of
  /// /dev/davinciN (present_devices()) when there are any (OptionError when
  /// there are fewer), else devices 0..nproc-1. The ranks read a generated
  /// one-server table (format 1.0, server_id 127.0.0.1, no device_ip).
  /// Giving a `rank_table` too is an OptionError; RANK_TABLE_FILE in the
  /// environment is ignored. Default: none.
  std::optional<int> nproc;
  /// Physical device ids (N of /dev/davinciN; unique, 0..max_table_integer).
  /// With a rank table: only these devices of a one-server table run, ranks
  /// renumbered 0..k-1 in the table's order (the ranks read the narrowed
  /// table; OptionError for a multi-server table or a device the table does
  /// not list). Without one (nothing given, nothing in the environment):
  /// the devices of a `nproc` plan, whose size defaults to their number.
  /// Default: none (every device of the table).
  std::optional<std::vector<int>> devices;
  /// How long to wait for a table the platform is still writing (missing,
  /// empty, half-written or status "initializing"); 0 = no waiting.
  /// Default 300 s, at most max_wait_timeout.
  std::chrono::milliseconds wait_timeout{300'000};
  /// Receives a line now and then while waiting for the table (may be
  /// empty); see RankTableLoadOptions::progress. The line names
  /// `supervisor.stop_request_name` as the way to end the wait and
  /// `no_wait_setting` as the way not to wait.
  std::function<void(const std::string&)> progress;
  /// How the user turns waiting off, in the front end's words, which those
  /// lines quote: the CLI "--wait-timeout 0", Python "wait_timeout=0".
  /// Default "wait_timeout 0".
  std::string no_wait_setting = "wait_timeout 0";
  /// Called about once a second while waiting for the table; throwing ends
  /// the wait (may be empty). See RankTableLoadOptions::keep_waiting.
  std::function<void()> keep_waiting;
  /// Working directory of the ranks; relative paths in `command` resolve here. Default ".".
  std::string work_dir = ".";
  /// Where each run's directory of per-rank logs is created. Empty (the
  /// default): `<cache root>/davincirun/log` when the cache disk is usable
  /// (usable_cache_dir(), platform_environment.hpp: /cache, or
  /// DAVINCIRUN_CACHE_ROOT), else "./log". A path given here always wins.
  std::string log_dir;
  /// This machine's server_id in the table. Without it the server is found
  /// from the environment and this machine's addresses and host name
  /// (server_identity.hpp); a multi-server table never falls back to its
  /// first server.
  std::optional<std::string> server_id;
  /// Extra variables for every rank; they win over inherited ones and the
  /// defaults, but not over the identity variables (see environment.hpp;
  /// naming one gives a warning in LaunchPlan::warnings). Names must be
  /// non-empty without '=' or NUL; values without NUL.
  std::vector<std::pair<std::string, std::string>> env;
  /// Where /dev/davinciN are looked for. Default "/dev", unless the launcher's DAVINCIRUN_DEVICE_DIR (absolute)
  /// names another: a container that sees the host's device files
  /// elsewhere, or a test's tree of regular files named davinciN.
  std::string device_dir = "/dev";
  /// The ranks whose output is shown live (console, notebook); the others
  /// go to their log files only. nullopt (the default): every rank. Ranks
  /// not on this server are ignored (so [0] can be given on every server);
  /// a negative rank, or one outside 0..world size-1, is an error.
  std::optional<std::vector<int>> ranks_to_show;
  /// Directories the job's supervisor process removes (recursively, never
  /// following symlinks) once the job is over, even when this process died
  /// meanwhile: e.g. a per-job compiler cache. Default: none.
  std::vector<std::string> remove_after_job;
  /// In a job that spans servers, the agents (davincirun on each server)
  /// connect to the agent on the server of rank 0 and stop together: a rank
  /// failing anywhere, a stop on one server, or an agent, host or link lost
  /// stops every server (docs/multi-server.md, "The peer channel").
  /// false: each server's job runs on its own. Default true, unless the
  /// launcher's DAVINCIRUN_PEERS is 0, off, false or no (for code that
  /// cannot pass false; another value is a ConfigError). One-server jobs
  /// have no channel.
  bool peers = true;
  /// The TCP port the agent of rank 0's server listens on for the others.
  /// Default: the launcher's DAVINCIRUN_PEER_PORT, else a port derived from
  /// the table and the job id like MASTER_PORT (derived_port(), purpose
  /// "DAVINCIRUN_PEER_PORT"), the same on every server. 1..65535.
  std::optional<int> peer_port;
  /// How long another server's agent may stay silent (no heartbeat) before
  /// it counts as lost and the job stops. Heartbeats go every sixth of it
  /// (50 ms..5 s). An agent that has not connected yet is waited for as
  /// long as the rank table is (`wait_timeout`). Default 30 s; more than 0,
  /// at most 24 h.
  std::chrono::milliseconds peer_timeout{30'000};
  /// The stall watchdog: when no rank of the job (on any server) writes any
  /// output for this long, each rank's Python stacks are written to its
  /// run directory (py-spy dump, when py-spy is on PATH) and the job is
  /// stopped (StopReason::stalled). It sees silence only: a rank that
  /// hangs while printing, or prints nothing for longer than this while
  /// working, is beyond it. 0 (the default): no watchdog. At most one year.
  std::chrono::milliseconds stall_timeout{0};
  /// Whether someone watches the ranks' output as it comes (a terminal, a
  /// notebook cell). Then Python ranks get PYTHONUNBUFFERED=1 (unless the
  /// environment or `env` sets PYTHONUNBUFFERED), so that each line shows
  /// at once and nothing waits in a rank's buffer when it crashes. When
  /// nobody watches (output to a file or pipe: a batch job), Python keeps
  /// its 8 KiB block buffer: printing line by line unbuffered costs a rank
  /// two write(2) calls per print(), 1.5-1.7x the CPU of a flood
  /// (bench/compare.py). Default true; `davincirun` sets it from whether
  /// its stdout or stderr is a terminal, the Python API from whether it
  /// runs in a Jupyter kernel or sys.stdout or sys.stderr is a terminal.
  bool output_watched = true;
  /// Timing of stops (`grace_period`, `job_timeout`, `drain_timeout`; their
  /// ranges are rules of validate()) and how exits are tracked (the variable
  /// DAVINCIRUN_PROCESS_TRACKING=pidfd|sigchld|automatic of the environment
  /// overrides `automatic`; 4.19 kernels need sigchld, which automatic picks
  /// by itself).
  SupervisorOptions supervisor;
  /// The davincirun-supervisor executable. Empty (the default): the
  /// DAVINCIRUN_SUPERVISOR variable of this process, else
  /// `davincirun-supervisor` next to this process's executable, else the
  /// one installed with the library: `../libexec/davincirun/` from this
  /// process's executable, then `<prefix>/libexec/davincirun/` of the
  /// prefix configured. ConfigError, naming the paths tried, when none is.
  std::string supervisor_program;
  /// Where the job locks its devices, so that a second job on any of them
  /// is refused at once with DeviceBusyError (device_lock.hpp). Empty (the
  /// default): the DAVINCIRUN_LOCK_DIR variable of the environment, else
  /// /tmp/davincirun-locks (default_device_lock_dir). "off": no locking.
  /// Must be absolute.
  std::string device_lock_dir;

  /// Checks every rule above that needs no rank table: nproc's range and
  /// not with a rank_table, devices unique in range and as many as nproc, a command, variable
  /// names and values, NUL bytes in any path or argument, the range of
  /// every duration, ranks to show that are not negative, an absolute lock
  /// directory. Throws OptionError naming the option, e.g.
  /// "env: invalid variable name 'A=B'".
  void validate() const;

  /// Sets the duration option `name` (a std::chrono::milliseconds of the
  /// option list below, e.g. "grace_period") from a number of seconds, as the
  /// front ends read it (a flag's text, a Python float): rounded to the
  /// nearest millisecond, a positive value never to 0 (which means "no
  /// waiting" or "no limit"). Throws OptionError, naming the option and its
  /// range, for a value validate() would refuse (NaN and infinities
  /// included), and for an unknown name.
  void set_seconds(std::string_view name, double seconds);
  /// The duration option `name` in seconds. Throws OptionError for an unknown name.
  double seconds(std::string_view name) const;
};

// The launch options, in the order `davincirun --help` shows their flags:
// each is a property of Python's LaunchOptions (named as the keyword) with
// this text as its doc, and with flag() a `davincirun` flag with it as its
// help; "{}" in the text is the default. A duration's range() is its rule
// (validate(), set_seconds()). `supervisor` adds SupervisorOptions' own.
constexpr auto fields_of(const LaunchOptions*) {
  using L = LaunchOptions;
  return std::make_tuple(
      field("rank_table", &L::rank_table,
            "rank table file, or a directory holding jobstart_hccl.json or hccl.json (default: "
            "$RANK_TABLE_FILE_V_1_0, else $RANK_TABLE_FILE)")
          .flag("PATH", 'r'),
      field("launch_mode", &L::launch_mode,
            "rank-table (default): each rank reads the table; dynamic-cluster: MindSpore's dynamic cluster, as msrun "
            "starts it: the ranks as workers plus a scheduler ([sched], scheduler.log) on the server of rank 0 "
            "(docs/mindspore.md); tf-config: TensorFlow's TF_CONFIG for MultiWorkerMirroredStrategy; cm: CANN's "
            "rank-table-free CM_* variables for TensorFlow on NPUs (docs/tensorflow.md)")
          .flag("MODE"),
      field("nproc", &L::nproc, "no rank table: N ranks on this machine").flag("N", 0, "a number of ranks, e.g. 2"),
      field("devices", &L::devices,
            "only these devices (physical ids, e.g. 0,1) of a one-server table; without a table, the devices of the "
            "ranks on this machine")
          .flag("LIST", 0, "device ids"),
      field("wait_timeout", &L::wait_timeout,
            "how long to wait for a rank table the platform is still writing (default: {}; 0: do not wait); a path "
            "whose folder does not exist fails at once")
          .flag("SEC")
          .range(0, max_wait_timeout.count(), " (no waiting)", " (one year)"),
      field("log_dir", &L::log_dir,
            "directory for run logs (default: /cache/davincirun/log when /cache is writable, else ./log); each run "
            "gets a new subdirectory, DIR/latest points to it")
          .flag("DIR", 'l'),
      field("work_dir", &L::work_dir, "working directory of the ranks (default: {})").flag("DIR", 'w'),
      field("server_id", &L::server_id,
            "this machine's server_id in the table (needed when the table lists several servers)")
          .flag("ID"),
      field("supervisor", &L::supervisor),
      field("peer_timeout", &L::peer_timeout,
            "several servers: stop the job when another server's agent is silent this long (default: {})")
          .flag("SEC")
          .range(0, max_grace_period.count()),
      field("peer_port", &L::peer_port,
            "several servers: the port the agent of rank 0's server listens on (default: $DAVINCIRUN_PEER_PORT, "
            "else derived from the table, alike on every server)")
          .flag("PORT", 0, "a TCP port number, e.g. 29600"),
      field("peers", &L::peers,
            "several servers: on (the default), the servers' jobs stop together; off (--no-peers, peers=False), "
            "each server's job runs on its own, with no job-wide stop (docs/multi-server.md)")
          .flag(""),
      field("stall_timeout", &L::stall_timeout,
            "stop the job when no rank of it wrote any output this long, after dumping Python stacks with py-spy "
            "(default and 0: no watchdog; exit status 124)")
          .flag("SEC")
          .range(0, max_job_timeout.count(), " (no watchdog)", " (one year)"),
      field("env", &L::env,
            "set a variable for every rank (repeatable); it wins over inherited values, not over the rank identity")
          .flag("NAME=VALUE"),
      field("ranks_to_show", &L::ranks_to_show,
            "show only these ranks' output live, e.g. 0 or 0,4 (default: all); every rank still gets its log file")
          .flag("LIST", 0, "rank ids"),
      field("command", &L::command, "the program every rank runs and its arguments (no shell)").as(FieldText::os_path),
      field("device_dir", &L::device_dir, "where /dev/davinciN are looked for (default: {})"),
      field("remove_after_job", &L::remove_after_job,
            "absolute directories the job's supervisor process removes once the job is over")
          .as(FieldText::os_path),
      field("supervisor_program", &L::supervisor_program,
            "the davincirun-supervisor executable; empty: found by the library"),
      field("device_lock_dir", &L::device_lock_dir,
            "where devices are locked; empty: $DAVINCIRUN_LOCK_DIR or /tmp/davincirun-locks; \"off\": no locking"),
      field("no_wait_setting", &L::no_wait_setting,
            "how the user turns waiting for the rank table off, as the waiting lines name it (\"wait_timeout=0\"; "
            "default: {})"),
      field("output_watched", &L::output_watched,
            "someone watches the output live: Python ranks get PYTHONUNBUFFERED=1 unless it is set (default: true)"));
}

/// An option's text (its Python doc, its `davincirun --help` line) with its
/// default value in place of "{}" (a duration in seconds).
template <typename Option>
std::string option_text(const Option& option) {
  std::string text = option.doc;
  const std::size_t at = text.find("{}");
  if (at == std::string::npos) return text;
  static const LaunchOptions defaults;
  using M = typename Option::Member;
  std::ostringstream value;
  if constexpr (std::is_same_v<M, std::chrono::milliseconds>) {
    value << std::chrono::duration<double>(option.of(defaults)).count();
  } else if constexpr (std::is_arithmetic_v<M> || std::is_same_v<M, std::string>) {
    value << option.of(defaults);
  } else {
    return text;  // no default to show
  }
  return text.replace(at, 2, value.str());
}

/// The peer channel of this server's agent (LaunchOptions::peers), and the
/// stall watchdog, which needs no channel on one server.
struct PeerPlan {
  bool enabled = false;          ///< several servers, and LaunchOptions::peers
  std::size_t server_count = 1;  ///< servers in the table (the run directory's name depends on it)
  bool hub = false;              ///< this server holds rank 0: its agent listens
  std::string hub_address;       ///< where the hub listens: MASTER_ADDR
  int port = 0;                  ///< LaunchOptions::peer_port, resolved
  std::size_t server_index = 0;
  std::size_t hub_index = 0;            ///< the server of rank 0
  std::vector<std::string> server_ids;  ///< every server's, in table order
  /// 32 bytes: SHA-256 of DAVINCIRUN_JOB_KEY when the platform set it,
  /// else HMAC-SHA-256 of the normalized table and the job id (the same on
  /// every server; docs/multi-server.md says what each protects against).
  std::string job_key;
  bool key_from_environment = false;
  std::chrono::milliseconds peer_timeout{30'000};
  std::chrono::milliseconds connect_timeout{300'000};  ///< LaunchOptions::wait_timeout
  std::chrono::milliseconds stall_timeout{0};
};

constexpr auto fields_of(const PeerPlan*) {
  using P = PeerPlan;
  return std::make_tuple(
      field("enabled", &P::enabled), field("server_count", &P::server_count), field("hub", &P::hub),
      field("hub_address", &P::hub_address), field("port", &P::port), field("server_index", &P::server_index),
      field("hub_index", &P::hub_index), field("server_ids", &P::server_ids), field("job_key", &P::job_key),
      field("key_from_environment", &P::key_from_environment), field("peer_timeout", &P::peer_timeout),
      field("connect_timeout", &P::connect_timeout), field("stall_timeout", &P::stall_timeout));
}

/// The rendezvous ports a job that restarts takes anew for each attempt
/// after the first: the last attempt's processes may still hold theirs
/// (a listening socket of a leftover, connections in TIME_WAIT).
struct AttemptPorts {
  /// The variables to set per attempt: MASTER_PORT and, in dynamic-cluster
  /// mode, MS_SCHED_PORT, in cm mode CM_CHIEF_PORT, unless the user set them
  /// (a user's port is kept). TF_CONFIG's ports stay: each is one rank's own
  /// listening socket, which its restarted process binds again.
  std::vector<std::string> names;
  /// Several launchers (one per server or pod): what every one of them
  /// derives the same port from (the table's digest, as for the first
  /// attempt). Empty: this launcher starts every rank, and takes a free port.
  std::string seed;
  std::string host;  ///< where a free port is looked for: MASTER_ADDR
};

constexpr auto fields_of(const AttemptPorts*) {
  return std::make_tuple(field("names", &AttemptPorts::names), field("seed", &AttemptPorts::seed),
                         field("host", &AttemptPorts::host));
}

/// The port of variable `name` for attempt `attempt` (2, 3, ...) of job
/// `job_id`: derived_port() of the seed, the job id and "<name>@<attempt>"
/// (alike on every server), or a free port on `ports.host` when the seed is
/// empty. Throws SystemError when no free port can be had.
int port_for_attempt(const AttemptPorts& ports, std::string_view job_id, std::string_view name, int attempt);

/// Everything decided before anything starts.
struct LaunchPlan {
  LaunchOptions options;
  RankTable table;
  std::size_t server_index = 0;  ///< this machine's server in `table`
  std::string server_reason;     ///< why, e.g. "server_id 10.0.0.11 is an address of this machine"
  JobEnvironment job;            ///< job-wide values (job id, master address...)
  /// This server's ranks, by rank, then (dynamic-cluster mode, on the
  /// server of rank 0) MindSpore's scheduler (ProcessRole::scheduler).
  std::vector<RankAssignment> ranks;
  std::vector<Environment> environments;  ///< one per entry of `ranks`
  std::string work_dir;                   ///< absolute
  std::string log_dir;                    ///< absolute; the run directory is made inside it
  /// `<cache root>/davincirun` when the cache disk is in use (usable_cache_dir()),
  /// else empty: the default log directory, ASCEND_WORK_PATH and ASCEND_CACHE_PATH go there.
  std::string cache_dir;
  std::string device_lock_dir;  ///< absolute; empty: the devices are not locked
  /// Why device_lock_dir is empty ("" when the devices are locked): "off"
  /// was asked for, or this machine has no NPU (no /dev/davinciN under
  /// LaunchOptions::device_dir or DAVINCIRUN_DEVICE_DIR) and no lock
  /// directory was named (LaunchOptions::device_lock_dir,
  /// DAVINCIRUN_LOCK_DIR): the "devices" are numbers no hardware backs, and
  /// the shared default directory would make unrelated CPU jobs (gloo,
  /// MindSpore's CPU wheel; two notebooks, two users) refuse each other,
  /// which torchrun never does. A named directory is still used: whoever
  /// names one asks for the exclusion.
  std::string device_locks_off;
  PeerPlan peers;
  AttemptPorts attempt_ports;  ///< a job that restarts: its ports per attempt
  /// What the launcher chose for the ranks that the user did not ask for,
  /// one sentence each, said once when the job starts (an information
  /// notice: `-q` leaves it to events.txt) and kept in summary.json: an
  /// OMP_NUM_THREADS default.
  std::vector<std::string> notes;
  /// What was accepted with a warning, one sentence each: the table's
  /// (RankTable::warnings), then the options' (an identity variable in `env`).
  std::vector<std::string> warnings;
};

/// Validates `options` (LaunchOptions::validate()), then finds, waits for,
/// reads and validates the rank table, finds this machine's server (and,
/// in a 0.1 table, its pod), assigns devices and builds each rank's
/// environment from `environment` (normally Environment::current()), which
/// also gives the launcher's own variables (DAVINCIRUN_PROCESS_TRACKING,
/// DAVINCIRUN_LOCK_DIR, DAVINCIRUN_CACHE_ROOT). Starts nothing and creates
/// nothing: the platform defaults that name directories of the run
/// (platform_environment.hpp) are set by the job's supervisor process.
/// Throws OptionError, ConfigError, RankTableError or SystemError.
LaunchPlan plan_launch(const LaunchOptions& options, const Environment& environment);

/// The rank table `environment` names: RANK_TABLE_FILE_V_1_0 (a 1.0 table
/// a platform names), else RANK_TABLE_FILE, davincirunsdk 0.1.x's order; an
/// empty variable counts as unset. Empty when neither is set.
std::string rank_table_named_by(const Environment& environment);

}  // namespace davincirun
