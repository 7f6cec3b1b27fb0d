#include "davincirun/launcher.hpp"

#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <string_view>

#include <fmt/format.h>

#include "davincirun/errors.hpp"
#include "davincirun/server_identity.hpp"
#include "detail/job_summary.hpp"

namespace davincirun {

const char* version() noexcept { return DAVINCIRUN_VERSION; }

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

std::string real_path(const std::string& path) {
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf)) throw SystemError("resolve " + path, errno);
  return buf;
}

std::string resolve_work_dir(const std::string& work_dir) {
  struct stat st {};
  const std::string dir = work_dir.empty() ? "." : work_dir;
  if (::stat(dir.c_str(), &st) != 0) {
    throw ConfigError(fmt::format("work_dir '{}' cannot be used: {}", dir, std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) throw ConfigError(fmt::format("work_dir '{}' is not a directory", dir));
  return real_path(dir);
}

int parse_port(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  long port = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || port < 1 || port > 65535) {
    throw ConfigError(fmt::format("MASTER_PORT must be a TCP port number (1-65535), got '{}'", text));
  }
  return static_cast<int>(port);
}

// MASTER_ADDR: loopback when every rank runs here; otherwise the address of
// the server holding rank 0 (its host_ip, else container_ip, else server_id).
std::string master_address(const RankTable& table) {
  if (table.servers.size() == 1) return "127.0.0.1";
  for (const auto& server : table.servers) {
    if (server.rank_start != 0) continue;
    if (server.host_ip) return *server.host_ip;
    if (server.container_ip) return *server.container_ip;
    return server.server_id;
  }
  return table.servers.front().server_id;
}

// In a 0.1 table two pods (containers) on one host share a server_id; the
// converted table merges them into one server, and each pod starts only its
// own devices, found by its pod name (ModelArts: MA_CURRENT_INSTANCE_NAME,
// older BATCH_TASK_CURRENT_INSTANCE). Returns `table` with this server's
// devices narrowed to this pod's.
RankTable this_pods_devices(const RankTable& table, std::size_t server_index, const Environment& env) {
  const RankTableServer& server = table.servers[server_index];
  if (server.pod_names.size() < 2) return table;
  std::optional<std::string> pod;
  for (const char* name : {"MA_CURRENT_INSTANCE_NAME", "BATCH_TASK_CURRENT_INSTANCE"}) {
    if (auto v = env.get(name); v && !v->empty()) {
      pod = *v;
      break;
    }
  }
  std::string pods;
  for (const auto& p : server.pod_names) pods += (pods.empty() ? "" : ", ") + p;
  if (!pod || std::find(server.pod_names.begin(), server.pod_names.end(), *pod) == server.pod_names.end()) {
    throw ConfigError(fmt::format(
        "server {} holds the pods {}; this pod's name ({}) does not name one of them "
        "(checked MA_CURRENT_INSTANCE_NAME, BATCH_TASK_CURRENT_INSTANCE)",
        server.server_id, pods, pod ? "'" + *pod + "'" : std::string("not set")));
  }
  RankTable narrowed = table;
  RankTableServer& mine = narrowed.servers[server_index];
  mine.devices.clear();
  for (const auto& d : server.devices) {
    if (d.pod_name == pod) mine.devices.push_back(d);
  }
  mine.rank_start = mine.devices.front().rank_id;
  for (const auto& d : mine.devices) mine.rank_start = std::min(mine.rank_start, d.rank_id);
  return narrowed;
}

void make_dirs(const std::string& path) {
  // mkdir -p: each missing component with mode 0755 (umask applies).
  for (std::size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    std::string part = path.substr(0, pos);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      throw ConfigError(fmt::format("cannot create log directory '{}': {}", part, std::strerror(errno)));
    }
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw ConfigError(fmt::format("log directory '{}' is not a directory", path));
  }
}

std::string make_run_dir(const std::string& log_dir, const std::string& job_id) {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &utc);
  const std::string base = fmt::format("{}/{}-{}", log_dir, stamp, job_id);
  // A new run never reuses a directory: mkdir fails on an existing one.
  for (int attempt = 0; attempt < 1000; ++attempt) {
    std::string dir = attempt == 0 ? base : fmt::format("{}.{}", base, attempt);
    if (::mkdir(dir.c_str(), 0700) == 0) return dir;
    if (errno != EEXIST) {
      throw ConfigError(fmt::format("cannot create run directory '{}': {}", dir, std::strerror(errno)));
    }
  }
  throw ConfigError(fmt::format("cannot create a new run directory next to '{}'", base));
}

// <log_dir>/latest → the newest run, for `tail -f log/latest/rank_0...`.
// Best effort: replaced atomically, never when `latest` is not a symlink.
void point_latest(const std::string& log_dir, const std::string& run_dir) {
  const std::string latest = log_dir + "/latest";
  struct stat st {};
  if (::lstat(latest.c_str(), &st) == 0 && !S_ISLNK(st.st_mode)) return;
  const std::string tmp = fmt::format("{}/.latest.{}", log_dir, ::getpid());
  ::unlink(tmp.c_str());
  const std::string target = run_dir.substr(run_dir.rfind('/') + 1);
  if (::symlink(target.c_str(), tmp.c_str()) == 0 && ::rename(tmp.c_str(), latest.c_str()) != 0) {
    ::unlink(tmp.c_str());
  }
}

}  // namespace

LaunchPlan plan_launch(const LaunchOptions& options, const Environment& environment) {
  if (options.command.empty() || options.command[0].empty()) {
    throw ConfigError("no command given: pass the program each rank runs, e.g. [\"python\", \"train.py\"]");
  }
  for (const auto& arg : options.command) {
    if (arg.find('\0') != std::string::npos) {
      throw ConfigError("an argument of the command contains a NUL character, which no program can receive");
    }
  }
  for (const auto& [name, value] : options.env) {
    if (name.empty() || name.find('=') != std::string::npos || name.find('\0') != std::string::npos) {
      throw ConfigError(fmt::format("invalid environment variable name '{}'", name));
    }
    if (value.find('\0') != std::string::npos) {
      throw ConfigError(fmt::format("the value of {} contains a NUL character", name));
    }
  }
  LaunchPlan plan;
  plan.options = options;

  std::string table_path = options.rank_table_file;
  if (table_path.empty()) table_path = environment.get("RANK_TABLE_FILE").value_or("");
  if (table_path.empty()) {
    throw ConfigError("no rank table: set RANK_TABLE_FILE or pass the rank table path explicitly");
  }
  RankTableLoadOptions load;
  load.wait_timeout = options.wait_timeout;
  load.progress = options.progress;
  load.keep_waiting = options.keep_waiting;
  LoadedRankTable loaded = wait_for_rank_table(table_path, load);
  plan.table = std::move(loaded.table);
  if (plan.table.status != "completed") {
    // The platform is still writing it (Kubernetes operator, ModelArts).
    throw ConfigError(fmt::format("rank table {} is not ready: its status is '{}', not 'completed'", table_path,
                                  plan.table.status));
  }
  // Explicit variables take part in the job-wide decisions (which server
  // this is, JOB_ID, MASTER_PORT, ASCEND_RT_VISIBLE_DEVICES).
  Environment with_extra = environment;
  for (const auto& [name, value] : options.env) with_extra.set(name, value);

  const ServerMatch match = identify_server(plan.table, with_extra, MachineIdentity::current(), options.server_id);
  plan.server_index = match.index;
  plan.server_reason = match.reason;

  std::optional<std::vector<int>> rt_visible;
  if (auto v = with_extra.get("ASCEND_RT_VISIBLE_DEVICES")) rt_visible = parse_visible_devices(*v);
  const RankTable local = this_pods_devices(plan.table, plan.server_index, with_extra);
  plan.ranks = allocate_ranks(local, plan.server_index, present_devices(options.device_dir), rt_visible);
  plan.work_dir = resolve_work_dir(options.work_dir);
  plan.log_dir = absolute(options.log_dir.empty() ? "./log" : options.log_dir);

  const RankTableServer& server = local.servers[plan.server_index];
  JobEnvironment& job = plan.job;
  job.rank_table_file = loaded.path;  // the source; Job points the ranks at its normalized copy
  job.world_size = plan.table.world_size;
  job.rank_start = server.rank_start;
  job.local_world_size = static_cast<int>(plan.ranks.size());
  job.job_id = resolve_job_id(with_extra);
  job.master_addr = master_address(plan.table);
  job.host_ip = server.host_ip.value_or(server.server_id);
  if (auto port = with_extra.get("MASTER_PORT"); port && !port->empty()) {
    job.master_port = parse_port(*port);
  } else {
    // One server: any free port will do. Several servers must agree without
    // talking, so use torch.distributed's conventional default.
    job.master_port = plan.table.servers.size() == 1 ? find_free_port(job.master_addr) : 29500;
  }
  for (const auto& rank : plan.ranks) {
    plan.environments.push_back(rank_environment(environment, job, rank, options.env));
  }
  return plan;
}

Job::Job(const LaunchPlan& plan, LineSink& console) : plan_(plan), console_(&console) {
  // With SIGCHLD ignored, the kernel reaps children itself and every exit
  // status is lost: refuse rather than report each rank as failed.
  struct sigaction chld {};
  if (::sigaction(SIGCHLD, nullptr, &chld) == 0 &&
      (chld.sa_handler == SIG_IGN || (chld.sa_flags & SA_NOCLDWAIT) != 0)) {
    throw ConfigError("this process ignores SIGCHLD (SIG_IGN or SA_NOCLDWAIT), so the ranks' exit statuses "
                      "would be lost; restore the default disposition before launching");
  }
  make_dirs(plan.log_dir);
  run_dir_ = make_run_dir(plan.log_dir, plan.job.job_id);
  point_latest(plan.log_dir, run_dir_);

  // The ranks read a copy the job owns: strictly formatted for HCCL, and
  // immune to a platform rewriting its own file in place mid-job.
  table_copy_ = run_dir_ + "/rank_table.json";
  write_normalized_rank_table(plan.table, table_copy_);

  std::vector<RankLaunch> launches;
  for (std::size_t i = 0; i < plan.ranks.size(); ++i) {
    const RankAssignment& a = plan.ranks[i];
    RankLaunch launch;
    launch.rank = a.rank;
    launch.label = fmt::format("rank {}", a.rank);
    launch.log_path = fmt::format("{}/rank_{}.device_{}.log", run_dir_, a.rank, a.physical_device_id);
    launch.process.argv = plan.options.command;
    Environment env = plan.environments[i];
    env.set("RANK_TABLE_FILE", table_copy_);
    launch.process.env = env.entries();
    launch.process.work_dir = plan.work_dir;
    launches.push_back(std::move(launch));
  }
  supervisor_ = std::make_unique<Supervisor>(std::move(launches), plan.options.supervisor, console);
}

JobResult Job::wait() {
  JobResult result = supervisor_->run();
  const std::string path = run_dir_ + "/summary.json";
  try {
    detail::write_job_summary(path, plan_, table_copy_, result);
  } catch (const std::exception& e) {
    console_->notice(fmt::format("[davincirun] cannot write the job summary {}: {}\n", path, e.what()));
  }
  return result;
}

namespace {
double seconds_between(std::chrono::system_clock::time_point a, std::chrono::system_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string rank_outcome(const RankResult& r) {
  const bool by_sigterm = r.status.kind == ExitStatus::Kind::signaled && r.status.value == SIGTERM;
  if (r.killed_by_launcher) return "killed by the launcher (SIGKILL)";
  if (r.terminated_by_launcher && by_sigterm) return "stopped by the launcher (SIGTERM)";
  if (r.terminated_by_launcher) return r.status.describe() + " after SIGTERM from the launcher";
  return r.status.describe();
}
}  // namespace

std::string failure_report(const JobResult& result, std::size_t tail_lines) {
  if (result.success()) return {};
  std::string out;
  if (result.first_failure) {
    const RankResult& f = result.ranks[*result.first_failure];
    out += fmt::format("rank {} (pid {}) failed with {} after {:.1f} s\n", f.rank, f.pid, f.status.describe(),
                       seconds_between(f.started, f.ended));
    out += fmt::format("log: {}\n", f.log_path);
    std::string tail = read_log_tail(f.log_path, tail_lines);
    if (tail.empty()) {
      out += "(its log is empty)\n";
    } else {
      out += fmt::format("last lines of its log:\n{}\n", tail);
    }
  } else if (result.stop_reason == StopReason::requested) {
    out += "the job was stopped on request\n";
  } else if (result.stop_reason == StopReason::timed_out) {
    out += "the job ran past its timeout and was stopped\n";
  }
  for (std::size_t i = 0; i < result.ranks.size(); ++i) {
    if (result.first_failure && *result.first_failure == i) continue;
    const RankResult& r = result.ranks[i];
    out += fmt::format("rank {} (pid {}): {}\n", r.rank, r.pid, rank_outcome(r));
  }
  for (const auto& r : result.ranks) {
    if (r.log_error) out += fmt::format("the log of rank {} is incomplete: {}\n", r.rank, *r.log_error);
  }
  return out;
}

}  // namespace davincirun
