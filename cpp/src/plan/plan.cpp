// plan_launch: options → rank table → this server → devices → environments.
#include "davincirun/plan.hpp"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/wide_hash.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/rank_table_loader.hpp"
#include "davincirun/socket_interface.hpp"
#include "plan/launch_modes.hpp"
#include "plan/peer_plan.hpp"
#include "plan/plan_tables.hpp"

namespace davincirun {

namespace {

std::string current_dir() {
  char buf[PATH_MAX];
  if (!::getcwd(buf, sizeof buf)) throw SystemError("getcwd", errno);
  return buf;
}

// An absolute path without "." components (".." is kept: it may cross a symlink).
std::string absolute(const std::string& path) {
  std::string joined = (!path.empty() && path[0] == '/') ? path : current_dir() + "/" + path;
  std::string out;
  std::size_t pos = 0;
  while (pos < joined.size()) {
    std::size_t next = joined.find('/', pos);
    if (next == std::string::npos) next = joined.size();
    std::string_view part(joined.data() + pos, next - pos);
    if (!part.empty() && part != ".") {
      out += '/';
      out += part;
    }
    pos = next + 1;
  }
  return out.empty() ? "/" : out;
}

std::string resolve_work_dir(const std::string& work_dir) {
  struct stat st{};
  const std::string dir = work_dir.empty() ? "." : work_dir;
  if (::stat(dir.c_str(), &st) != 0) {
    throw OptionError("work_dir", fmt::format("work_dir '{}' cannot be used: {}", dir, std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) throw OptionError("work_dir", fmt::format("work_dir '{}' is not a directory", dir));
  char real[PATH_MAX];
  if (!::realpath(dir.c_str(), real)) throw SystemError("resolve " + dir, errno);
  return real;
}

// What every server derives its job id and ports from: the normalized
// table's digest, in hex. Hashed once, by words (a table of 65,536 ranks is
// 9 MB), where the reader has not hashed it beside the table.
std::string table_digest(const RankTable& table) {
  const std::uint64_t hash =
      table.normalized_hash ? *table.normalized_hash : detail::wide_hash64(table.normalized_json);
  return fmt::format("{:016x}", hash);
}

// A rendezvous port: the user's (`name` in the environment or the extra
// variables), else a free one when this launcher starts every rank, else one
// derived alike by every launcher (one per server, or per pod; from
// `digest`, table_digest()). Checked free on the server of rank 0, which
// binds it, unless it was just found free.
int rendezvous_port(const Environment& env, std::string_view name, const JobEnvironment& job, bool several_launchers,
                    const std::string& digest) {
  int port = 0;
  bool found_free = false;
  if (auto value = env.get(name); value && !value->empty()) {
    port = parse_port(name, *value);
  } else if (!several_launchers) {
    port = find_free_port(job.master_addr);
    found_free = true;
  } else {
    port = derived_port(digest, job.job_id, name);
  }
  if (!found_free && job.rank_start == 0) {
    check_port_free(port, name,
                    name == "MS_SCHED_PORT"   ? "MindSpore's scheduler listens on it here, the server of rank 0"
                    : name == "CM_CHIEF_PORT" ? "rank 0's process listens on it here for CANN's cluster set-up"
                                              : "rank 0 listens on it here for torch.distributed's rendezvous");
  }
  return port;
}

// MASTER_ADDR: loopback when every rank runs here; otherwise the address of
// the server holding rank 0 (detail::server_address()).
std::string master_address(const RankTable& table) {
  if (table.servers.size() == 1) return "127.0.0.1";
  for (const auto& server : table.servers) {
    if (server.rank_start == 0) return detail::server_address(server);
  }
  return table.servers.front().server_id;
}

ProcessTracking tracking_from(const Environment& env, ProcessTracking configured) {
  if (configured != ProcessTracking::automatic) return configured;
  const auto value = env.get("DAVINCIRUN_PROCESS_TRACKING");
  if (!value || value->empty()) return ProcessTracking::automatic;
  if (const auto tracking = enum_parse<ProcessTracking>(*value)) return *tracking;
  throw ConfigError(fmt::format("DAVINCIRUN_PROCESS_TRACKING must be pidfd, sigchld or automatic, got '{}'", *value));
}

// The lock directory: the option (validated absolute), else the launcher's
// own DAVINCIRUN_LOCK_DIR (never the ranks' extra variables), else the
// default; empty for "off". A relative variable is refused like the option.
std::string device_lock_dir_from(const Environment& env, const std::string& configured) {
  std::string dir = configured;
  if (dir.empty()) {
    dir = env.get("DAVINCIRUN_LOCK_DIR").value_or("");
    if (!dir.empty() && dir != "off" && dir[0] != '/') {
      throw ConfigError(
          fmt::format("DAVINCIRUN_LOCK_DIR must be an absolute path (or \"off\"), got '{}': jobs "
                      "started from other directories would not see each other's device locks",
                      dir));
    }
  }
  if (dir.empty()) dir = default_device_lock_dir;
  if (dir == "off") return {};
  return absolute(dir);
}

// What the options ask that has no effect, for LaunchPlan::warnings.
std::vector<std::string> option_warnings(const LaunchOptions& options) {
  std::vector<std::string> warnings;
  const LaunchMode mode = options.launch_mode;
  for (const auto& [name, value] : options.env) {
    const auto& identity = identity_variable_names();
    const bool cm_refused =
        mode == LaunchMode::cm && (name == "RANK_TABLE_FILE" || name == "RANK_ID" || name == "RANK_SIZE");
    const bool mode_sets = (mode == LaunchMode::tf_config && name == "TF_CONFIG") ||
                           (mode == LaunchMode::cm && name.rfind("CM_", 0) == 0 && name != "CM_CHIEF_PORT");
    if (cm_refused) {
      warnings.push_back(fmt::format(
          "{} is removed from every rank in launch mode cm: CANN refuses it beside the CM_* variables", name));
    } else if (mode_sets || std::find(identity.begin(), identity.end(), name) != identity.end()) {
      warnings.push_back(
          fmt::format("{} has no effect among the extra variables: the launcher sets it for each rank", name));
    }
  }
  const SupervisorOptions& s = options.supervisor;
  if (s.max_restarts == 0 && (s.restart_delay != default_restart_delay || s.restart_on_same_error)) {
    warnings.push_back(fmt::format("{} has no effect without max_restarts (--max-restarts): the job does not restart",
                                   s.restart_on_same_error ? "restart_on_same_error" : "restart_delay"));
  }
  return warnings;
}

// Without a rank table (a debug machine): --nproc, or --devices alone.
bool plans_without_table(const LaunchOptions& options, const Environment& environment) {
  if (options.nproc) return true;
  if (!options.devices || !options.rank_table.empty()) return false;
  return rank_table_named_by(environment).empty();
}

// Where /dev/davinciN are looked for: the option when not the default,
// else the launcher's DAVINCIRUN_DEVICE_DIR (absolute), else /dev.
std::string device_dir_from(const LaunchOptions& options, const Environment& env) {
  static const LaunchOptions defaults;
  if (options.device_dir != defaults.device_dir) return options.device_dir;
  std::string dir = env.get("DAVINCIRUN_DEVICE_DIR").value_or("");
  if (dir.empty()) return options.device_dir;
  if (dir[0] != '/') {
    throw ConfigError(fmt::format("DAVINCIRUN_DEVICE_DIR must be an absolute path, got '{}'", dir));
  }
  return dir;
}

// The one-server table of a plan without a table (LaunchOptions::nproc),
// over the NPUs `present` under `device_dir`.
LoadedRankTable machine_table(const LaunchOptions& options, const std::string& device_dir,
                              const std::vector<int>& present) {
  std::vector<int> devices;
  if (options.devices) {
    devices = *options.devices;
  } else {
    const int n = options.nproc.value_or(0);  // set: plans_without_table() said so
    if (!present.empty() && static_cast<std::size_t>(n) > present.size()) {
      throw OptionError("nproc",
                        fmt::format("nproc {} asks for more ranks than this machine has NPUs ({}: {} under {})", n,
                                    present.size(), fmt::join(present, ","), device_dir));
    }
    for (int i = 0; i < n; ++i) devices.push_back(present.empty() ? i : present[static_cast<std::size_t>(i)]);
  }
  LoadedRankTable loaded;
  loaded.table = detail::one_server_table(devices, fmt::format("(this machine, devices {})", fmt::join(devices, ",")));
  return loaded;
}

LoadedRankTable load_completed_table(const LaunchOptions& options, const Environment& environment) {
  const std::string path = options.rank_table.empty() ? rank_table_named_by(environment) : options.rank_table;
  if (path.empty()) {
    throw NoRankTableError("no rank table: set RANK_TABLE_FILE or give ",
                           " (the rank table file, or the directory holding it); on a machine without one, "
                           "nproc=N (davincirun --nproc N) runs N ranks here");
  }
  RankTableLoadOptions load;
  load.wait_timeout = options.wait_timeout;
  load.progress = options.progress;
  load.no_wait_setting = options.no_wait_setting;
  load.stop_name = options.supervisor.stop_request_name;
  load.keep_waiting = options.keep_waiting;
  LoadedRankTable loaded = wait_for_rank_table(path, load);
  if (loaded.table.status != "completed") {
    // The platform is still writing it (Kubernetes operator, ModelArts).
    throw ConfigError(
        fmt::format("rank table {} is not ready: its status is '{}', not 'completed'", path, loaded.table.status));
  }
  return loaded;
}

}  // namespace

LaunchPlan plan_launch(const LaunchOptions& options, const Environment& environment) {
  options.validate();
  LaunchPlan plan;
  plan.options = options;
  const bool without_table = plans_without_table(options, environment);
  // Read once: the table made without one, the ranks' devices and the locks all follow it.
  const std::string device_dir = device_dir_from(options, environment);
  const std::vector<int> present = present_devices(device_dir);
  LoadedRankTable loaded =
      without_table ? machine_table(options, device_dir, present) : load_completed_table(options, environment);
  plan.table = std::move(loaded.table);
  if (options.devices && !without_table) {
    plan.table = detail::narrowed_table(plan.table, *options.devices,
                                        fmt::format("{} (devices {})", loaded.path, fmt::join(*options.devices, ",")));
  }
  if (options.ranks_to_show) {
    for (const int rank : *options.ranks_to_show) {
      if (rank >= plan.table.world_size) {
        throw OptionError("ranks_to_show", fmt::format("ranks_to_show: rank {} does not exist (the world size is {})",
                                                       rank, plan.table.world_size));
      }
    }
  }
  plan.warnings = plan.table.warnings;
  for (auto& warning : option_warnings(options)) plan.warnings.push_back(std::move(warning));

  // Explicit variables take part in the job-wide decisions (which server
  // this is, JOB_ID, MASTER_PORT, ASCEND_RT_VISIBLE_DEVICES).
  Environment with_extra = environment;
  for (const auto& [name, value] : options.env) with_extra.set(name, value);
  for (auto& warning : platform_warnings(with_extra)) plan.warnings.push_back(std::move(warning));

  const MachineIdentity machine = MachineIdentity::current();
  const LocalServer local = find_local_server(plan.table, with_extra, machine, options.server_id);
  plan.server_index = local.index;
  plan.server_reason = local.reason;
  std::optional<std::vector<int>> rt_visible;
  if (auto v = with_extra.get("ASCEND_RT_VISIBLE_DEVICES")) rt_visible = parse_visible_devices(*v);
  plan.ranks = allocate_ranks(local.server, present, rt_visible);
  plan.work_dir = resolve_work_dir(options.work_dir);
  plan.cache_dir = usable_cache_dir(environment);
  plan.log_dir = absolute(options.log_dir.empty() ? default_log_dir(plan.cache_dir) : options.log_dir);

  JobEnvironment& job = plan.job;
  job.rank_table_file = loaded.path;  // the source; the Job points the ranks at its normalized copy
  job.world_size = plan.table.world_size;
  job.rank_start = local.server.rank_start;
  job.local_world_size = static_cast<int>(plan.ranks.size());  // before the scheduler joins them
  job.group_rank = static_cast<int>(local.index);
  job.group_world_size = static_cast<int>(plan.table.servers.size());
  // Several launchers (one per server, or per pod when pods share one) must
  // agree on the job id and the ports derived from it without talking: from
  // the table they all read.
  const bool several_launchers =
      plan.table.servers.size() > 1 || local.server.devices.size() < plan.table.servers[local.index].devices.size();
  const std::string digest = table_digest(plan.table);
  job.job_id = resolve_job_id(with_extra, several_launchers ? digest : std::string());
  job.master_addr = master_address(plan.table);
  job.host_ip = local.server.host_ip.value_or(local.server.server_id);
  job.python_unbuffered = options.output_watched;
  if (plan.table.servers.size() > 1) {
    if (auto interface = socket_interface(local.server, local.local_address, machine)) {
      job.socket_interface = interface->name;
      job.socket_address = interface->address;
    }
  }
  job.launch_mode = options.launch_mode;
  const bool dynamic_cluster = job.launch_mode == LaunchMode::dynamic_cluster;
  if (dynamic_cluster) {
    job.topo_timeout_s = static_cast<int>((options.wait_timeout.count() + 999) / 1000);
    job.sched_port = rendezvous_port(with_extra, "MS_SCHED_PORT", job, several_launchers, digest);
    // Workers keep MASTER_PORT (set, never bound by MindSpore): the user's, or a free one.
    const auto user_port = with_extra.get("MASTER_PORT");
    job.master_port = user_port && !user_port->empty() ? parse_port("MASTER_PORT", *user_port)
                                                       : derived_port(digest, job.job_id, "MASTER_PORT");
  } else {
    job.master_port = rendezvous_port(with_extra, "MASTER_PORT", job, several_launchers, digest);
  }
  if (job.launch_mode == LaunchMode::cm) {
    job.cm_chief_port = rendezvous_port(with_extra, "CM_CHIEF_PORT", job, several_launchers, digest);
    detail::plan_cm(job, plan.table, local, plan.ranks);
  } else if (job.launch_mode == LaunchMode::tf_config) {
    job.tf_cluster_json =
        detail::tf_cluster_json(plan.table, local, job.job_id, several_launchers ? digest : std::string());
  }
  plan.attempt_ports.seed = several_launchers ? digest : std::string();
  plan.attempt_ports.host = job.master_addr;
  std::vector<const char*> rendezvous_ports{"MASTER_PORT"};
  if (dynamic_cluster) rendezvous_ports.push_back("MS_SCHED_PORT");
  if (job.launch_mode == LaunchMode::cm) rendezvous_ports.push_back("CM_CHIEF_PORT");
  for (const char* name : rendezvous_ports) {
    if (with_extra.get(name).value_or("").empty()) plan.attempt_ports.names.emplace_back(name);
  }
  job.max_restarts = options.supervisor.max_restarts;
  if (dynamic_cluster && job.rank_start == 0) {
    // MindSpore's scheduler runs with the server of rank 0, as msrun starts
    // it on the node whose address is --master_addr.
    RankAssignment scheduler;
    scheduler.role = ProcessRole::scheduler;
    scheduler.rank = scheduler.local_rank = scheduler.physical_device_id = scheduler.logical_device_id = -1;
    plan.ranks.push_back(scheduler);
  }
  for (const auto& rank : plan.ranks) {
    plan.environments.push_back(rank_environment(environment, job, rank, options.env));
  }
  plan.options.supervisor.tracking = tracking_from(with_extra, options.supervisor.tracking);
  plan.options.supervisor.kill_on_failure = job.launch_mode == LaunchMode::tf_config;
  plan.device_lock_dir = device_lock_dir_from(environment, options.device_lock_dir);
  const bool lock_dir_named =
      !options.device_lock_dir.empty() || !environment.get("DAVINCIRUN_LOCK_DIR").value_or("").empty();
  if (plan.device_lock_dir.empty()) {
    plan.device_locks_off = "off, as DAVINCIRUN_LOCK_DIR or device_lock_dir asks";
  } else if (present.empty() && !lock_dir_named) {
    // The shared default directory would make unrelated CPU jobs (two
    // notebooks, two users) refuse each other over devices no hardware backs.
    plan.device_locks_off = fmt::format(
        "none: this machine has no NPU (no {}/davinciN), so CPU jobs never refuse each other (name a lock "
        "directory with DAVINCIRUN_LOCK_DIR to lock even here)",
        device_dir);
    plan.device_lock_dir.clear();
  }
  if (job.local_world_size > 1 && !with_extra.get("OMP_NUM_THREADS")) {
    plan.notes.push_back(fmt::format(
        "OMP_NUM_THREADS={} for each rank, as torchrun sets it when it is unset: set OMP_NUM_THREADS for the job "
        "to give each rank more threads",
        default_omp_num_threads));
  }
  plan.peers = detail::plan_peers(options, plan.table, plan.server_index, job, environment, digest);
  return plan;
}

std::string rank_table_named_by(const Environment& environment) {
  for (const char* name : {"RANK_TABLE_FILE_V_1_0", "RANK_TABLE_FILE"}) {
    if (std::string path = environment.get(name).value_or(""); !path.empty()) return path;
  }
  return {};
}

}  // namespace davincirun
