#include "davincirun/launcher.hpp"

#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "davincirun/device_lock.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/server_identity.hpp"
#include "detail/descendants.hpp"
#include "detail/job_protocol.hpp"
#include "detail/unique_fd.hpp"

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

ProcessTracking tracking_from(const Environment& env, ProcessTracking configured) {
  if (configured != ProcessTracking::automatic) return configured;
  const auto value = env.get("DAVINCIRUN_PROCESS_TRACKING");
  if (!value || value->empty() || *value == "automatic") return ProcessTracking::automatic;
  if (*value == "pidfd") return ProcessTracking::pidfd;
  if (*value == "sigchld") return ProcessTracking::sigchld;
  throw ConfigError(fmt::format("DAVINCIRUN_PROCESS_TRACKING must be pidfd, sigchld or automatic, got '{}'", *value));
}

// LaunchOptions::device_lock_dir, from the launcher's own environment (never
// from the ranks' extra variables): absolute, or empty for no locking. A
// relative path is refused: jobs started from different directories would
// lock in different places and silently share devices.
std::string device_lock_dir_from(const Environment& env, const std::string& configured) {
  std::string dir = configured;
  const char* origin = "LaunchOptions::device_lock_dir";
  if (dir.empty()) {
    dir = env.get("DAVINCIRUN_LOCK_DIR").value_or("");
    origin = "DAVINCIRUN_LOCK_DIR";
  }
  if (dir.empty()) dir = default_device_lock_dir;
  if (dir == "off") return {};
  if (dir[0] != '/') {
    throw ConfigError(fmt::format("{} must be an absolute path (or \"off\"), got '{}': jobs started from other "
                                  "directories would not see each other's device locks",
                                  origin, dir));
  }
  return absolute(dir);
}

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// The davincirun-supervisor executable: see LaunchOptions::supervisor_program.
std::string find_supervisor_program(const std::string& configured) {
  if (!configured.empty()) {
    if (!is_executable_file(configured)) {
      throw ConfigError(fmt::format("the job supervisor program '{}' is not an executable file", configured));
    }
    return configured;
  }
  if (const char* env = ::getenv("DAVINCIRUN_SUPERVISOR"); env && *env) {
    if (!is_executable_file(env)) {
      throw ConfigError(fmt::format("DAVINCIRUN_SUPERVISOR='{}' is not an executable file", env));
    }
    return env;
  }
  std::vector<std::string> tried;
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string dir(self, static_cast<std::size_t>(n));
    dir.resize(dir.rfind('/'));
    tried.push_back(dir + "/davincirun-supervisor");
  }
#ifdef DAVINCIRUN_LIBEXEC_DIR
  tried.push_back(std::string(DAVINCIRUN_LIBEXEC_DIR) + "/davincirun-supervisor");
#endif
  for (const auto& path : tried) {
    if (is_executable_file(path)) return path;
  }
  std::string list;
  for (const auto& path : tried) list += (list.empty() ? "" : ", ") + path;
  throw ConfigError(fmt::format("cannot find the davincirun-supervisor program (tried {}); set "
                                "DAVINCIRUN_SUPERVISOR to its path",
                                list));
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
  plan.options.supervisor.tracking = tracking_from(with_extra, options.supervisor.tracking);
  if (options.ranks_to_show) {
    for (int rank : *options.ranks_to_show) {
      if (rank < 0 || rank >= plan.table.world_size) {
        throw ConfigError(fmt::format("ranks_to_show: rank {} does not exist (the world size is {})", rank,
                                      plan.table.world_size));
      }
    }
  }
  plan.device_lock_dir = device_lock_dir_from(environment, options.device_lock_dir);
  return plan;
}

struct Job::Connection {
  detail::UniqueFd lifeline;
  ChildProcess host;
  detail::FrameReader reader;
  Connection(detail::UniqueFd fd, ChildProcess child)
      : lifeline(std::move(fd)), host(std::move(child)), reader(lifeline.get()) {}
};

Job::Job(const LaunchPlan& plan, LineSink& console) : console_(&console) {
  start(plan, static_cast<int>(detail::ConsoleRoute::relay));
}

Job::Job(const LaunchPlan& plan, ConsoleTarget console) {
  start(plan, static_cast<int>(console == ConsoleTarget::stdio ? detail::ConsoleRoute::stdio
                                                              : detail::ConsoleRoute::none));
}

void Job::start(const LaunchPlan& plan, int route) {
  const std::string program = find_supervisor_program(plan.options.supervisor_program);
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) throw SystemError("socketpair", errno);
  detail::UniqueFd mine(pair[0]), theirs(pair[1]);

  ProcessSpec spec;
  spec.argv = {program, "--lifeline-fd=3"};
  spec.env = Environment::current().entries();
  spec.capture_output = false;  // its own messages, if any, go where ours go
  spec.pass_fds = {theirs.get()};
  spec.new_session = true;       // no terminal signal or hangup reaches it
  spec.die_with_parent = false;  // it must outlive us to stop the job
  spec.use_pidfd = false;        // reaped by pid; works on any kernel
  ChildProcess host = [&] {
    try {
      return ChildProcess::spawn(spec, -1);
    } catch (const SpawnError& e) {
      throw ConfigError(fmt::format("cannot start the job supervisor process {}: {}", program,
                                    std::strerror(e.os_errno())));
    }
  }();
  theirs.reset();
  lifeline_fd_ = mine.get();
  connection_ = std::make_unique<Connection>(std::move(mine), std::move(host));

  auto abandon = [this] {
    connection_->lifeline.reset();  // the supervisor stops whatever it started
    lifeline_fd_ = -1;
    connection_->host.reap();
    connection_.reset();
  };
  detail::Frame type{};
  std::string payload;
  try {
    if (!detail::write_frame(lifeline_fd_, detail::Frame::spec,
                             detail::encode_spec(detail::make_job_spec(plan, static_cast<detail::ConsoleRoute>(route))))) {
      throw Error("the job supervisor process exited before it got the job");
    }
    for (;;) {
      if (!connection_->reader.next(type, payload)) {
        throw Error("the job supervisor process exited before starting the job");
      }
      if (console_) detail::deliver_console_frame(type, payload, *console_);
      if (type == detail::Frame::error) detail::rethrow_error(payload);
      if (type == detail::Frame::started) break;
    }
    detail::StartedJob started = detail::decode_started(payload);
    run_dir_ = std::move(started.run_dir);
    tag_ = std::move(started.tag);
    pids_ = std::move(started.pids);
    tracking_ = started.tracking;
  } catch (...) {
    abandon();
    throw;
  }
}

Job::~Job() {
  if (!connection_) return;
  if (waited_) {
    request_kill();
  } else {
    request_kill_dropped();
  }
  // Closing our end is the lifeline cut: the supervisor stops at once and
  // ends; its remaining frames are dropped.
  ::shutdown(connection_->lifeline.get(), SHUT_RDWR);
  connection_->lifeline.reset();
  lifeline_fd_ = -1;
  try {
    connection_->host.reap();
  } catch (...) {
    // ~ChildProcess kills and reaps it.
  }
}

pid_t Job::supervisor_pid() const noexcept { return connection_ ? connection_->host.pid() : -1; }

void Job::send_command(const char* bytes, std::size_t size) noexcept {
  const int fd = lifeline_fd_;
  if (fd < 0) return;
  // One send() of at most two bytes: atomic, async-signal-safe, no SIGPIPE.
  ssize_t ignored = ::send(fd, bytes, size, MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)ignored;
}

void Job::request_stop() noexcept { send_command(&detail::command_stop, 1); }
void Job::request_kill() noexcept { send_command(&detail::command_kill, 1); }
void Job::request_kill_dropped() noexcept { send_command(&detail::command_drop, 1); }
void Job::forward_signal(int signal) noexcept {
  if (signal <= 0 || signal >= 32) return;
  const char bytes[2] = {detail::command_forward, static_cast<char>(signal)};
  send_command(bytes, sizeof bytes);
}

JobResult Job::wait() {
  if (waited_ || !connection_) throw std::logic_error("Job::wait() called twice");
  waited_ = true;
  std::optional<JobResult> result;
  std::optional<std::string> error;
  detail::Frame type{};
  std::string payload;
  std::exception_ptr broken;
  try {
    while (connection_->reader.next(type, payload)) {
      switch (type) {
        case detail::Frame::lines:
        case detail::Frame::notice:
        case detail::Frame::progress:
        case detail::Frame::rank_exited:
          if (console_) detail::deliver_console_frame(type, payload, *console_);
          break;
        case detail::Frame::result:
          result = detail::decode_result(payload);
          break;
        case detail::Frame::error:
          error = payload;
          break;
        default:
          break;
      }
    }
  } catch (...) {
    broken = std::current_exception();
  }
  lifeline_fd_ = -1;
  connection_->lifeline.reset();
  const pid_t host_pid = connection_->host.pid();
  const ExitStatus host_status = connection_->host.reap();
  connection_.reset();
  if (error) detail::rethrow_error(*error);
  if (result) return *result;
  // The supervisor died (e.g. SIGKILLed): its ranks died with it, but not
  // what they started outside their groups. Find those by the job's tag.
  const std::size_t swept =
      tag_.empty() ? 0 : detail::kill_tagged_processes("DAVINCIRUN_JOB_TAG=" + tag_, std::chrono::seconds(5));
  if (broken) std::rethrow_exception(broken);
  throw Error(fmt::format("the job supervisor process (pid {}) ended with {} before reporting the result; its "
                          "ranks were killed with it{}",
                          host_pid, host_status.describe(),
                          swept ? fmt::format("; {} more process(es) of the job were still running and are killed",
                                              swept)
                                : std::string()));
}

namespace {
double seconds_between(std::chrono::system_clock::time_point a, std::chrono::system_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// "0, 2-7, 9" for ranks {0, 2, 3, 4, 5, 6, 7, 9}.
std::string rank_ranges(std::vector<int> ids) {
  std::sort(ids.begin(), ids.end());
  std::string out;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += j == i ? std::to_string(ids[i]) : fmt::format("{}-{}", ids[i], ids[j]);
    i = j + 1;
  }
  return out;
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
    // The job's span, from its first start to its last exit: the timeout plus the stop.
    auto first = std::min_element(result.ranks.begin(), result.ranks.end(),
                                  [](const RankResult& a, const RankResult& b) { return a.started < b.started; });
    auto last = std::max_element(result.ranks.begin(), result.ranks.end(),
                                 [](const RankResult& a, const RankResult& b) { return a.ended < b.ended; });
    out += first == result.ranks.end()
               ? std::string("the job ran past its timeout and was stopped\n")
               : fmt::format("the job ran past its timeout and was stopped; it ran {:.1f} s in all\n",
                             seconds_between(first->started, last->ended));
  } else if (result.stop_reason == StopReason::signaled) {
    out += fmt::format("the job was stopped by {} to its supervisor process\n",
                       ExitStatus{ExitStatus::Kind::signaled, result.stop_signal}.describe());
  }
  // The other ranks: one line each, or one line per outcome when more than
  // `group_above` ranks share it (32 stopped ranks need not be 31 lines).
  constexpr std::size_t group_above = 4;
  std::vector<std::pair<std::string, std::vector<const RankResult*>>> outcomes;
  for (std::size_t i = 0; i < result.ranks.size(); ++i) {
    if (result.first_failure && *result.first_failure == i) continue;
    std::string outcome = rank_outcome(result.ranks[i]);
    auto it = std::find_if(outcomes.begin(), outcomes.end(), [&](const auto& o) { return o.first == outcome; });
    if (it == outcomes.end()) it = outcomes.insert(outcomes.end(), {std::move(outcome), {}});
    it->second.push_back(&result.ranks[i]);
  }
  for (const auto& [outcome, ranks] : outcomes) {
    if (ranks.size() <= group_above) {
      for (const RankResult* r : ranks) out += fmt::format("rank {} (pid {}): {}\n", r->rank, r->pid, outcome);
      continue;
    }
    std::vector<int> ids;
    for (const RankResult* r : ranks) ids.push_back(r->rank);
    out += fmt::format("{} ranks ({}): {}\n", ranks.size(), rank_ranges(ids), outcome);
  }
  for (const auto& r : result.ranks) {
    if (r.log_error) out += fmt::format("the log of rank {} is incomplete: {}\n", r.rank, *r.log_error);
  }
  return out;
}

}  // namespace davincirun
