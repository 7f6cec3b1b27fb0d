// The launcher's side of a job: start its supervisor process, hand it the
// plan, relay what it says, and send it commands.
#include "davincirun/job.hpp"

#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "davincirun/errors.hpp"
#include "job/job_protocol.hpp"
#include "job/supervisor_program.hpp"
#include "process/descendants.hpp"

namespace davincirun {

std::string rank_log_file_name(const RankAssignment& rank, int attempt) {
  const std::string suffix = attempt > 1 ? fmt::format(".attempt{}", attempt) : std::string();
  if (rank.role == ProcessRole::scheduler) return "scheduler" + suffix + ".log";
  return fmt::format("rank_{}.device_{}{}.log", rank.rank, rank.physical_device_id, suffix);
}

namespace {

// What the supervisor process needs of the plan.
detail::JobSpec make_job_spec(const LaunchPlan& plan, detail::ConsoleRoute console) {
  detail::JobSpec spec;
  spec.log_dir = plan.log_dir;
  spec.job_id = plan.job.job_id;
  spec.rank_table_json = plan.table.normalized_json;
  spec.rank_table_source = plan.job.rank_table_file;
  spec.server_id = plan.table.servers[plan.server_index].server_id;
  spec.world_size = plan.job.world_size;
  spec.command = plan.options.command;
  spec.work_dir = plan.work_dir;
  spec.device_lock_dir = plan.device_lock_dir;
  spec.ranks = plan.ranks;
  const auto& shown = plan.options.ranks_to_show;
  for (const auto& a : plan.ranks) {
    spec.show_on_console.push_back(!shown || std::find(shown->begin(), shown->end(), a.rank) != shown->end());
  }
  for (const auto& env : plan.environments) spec.environments.push_back(env.entries());
  spec.supervisor = plan.options.supervisor;
  spec.console = console;
  spec.remove_after_job = plan.options.remove_after_job;
  spec.cache_dir = plan.cache_dir;
  spec.peers = plan.peers;
  spec.notes = plan.notes;
  spec.attempt_ports = plan.attempt_ports;
  return spec;
}

// Starts the supervisor program with its end of the lifeline as descriptor 3.
ChildProcess start_supervisor_process(const std::string& program, int lifeline_fd) {
  ProcessSpec spec;
  spec.argv = {program, "--lifeline-fd=3"};
  spec.env = Environment::current().entries();
  spec.capture_output = false;  // its own messages, if any, go where ours go
  spec.pass_fds = {lifeline_fd};
  spec.new_session = true;       // no terminal signal or hangup reaches it
  spec.die_with_parent = false;  // it must outlive us to stop the job
  spec.use_pidfd = false;        // reaped by pid; works on any kernel
  try {
    return ChildProcess::spawn(spec, -1);
  } catch (const SpawnError& e) {
    throw ConfigError(
        fmt::format("cannot start the job supervisor process {}: {}", program, std::strerror(e.os_errno())));
  }
}

}  // namespace

struct SupervisorProcess::Parts {
  UniqueFd lifeline;
  ChildProcess host;
};

namespace {

// The two ends of the lifeline: ours, and the one the supervisor gets.
std::pair<UniqueFd, UniqueFd> lifeline_pair() {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) throw SystemError("socketpair", errno);
  return {UniqueFd(pair[0]), UniqueFd(pair[1])};
}

}  // namespace

SupervisorProcess::SupervisorProcess(const std::string& program) {
  const std::string path = detail::find_supervisor_program(program);
  auto [mine, theirs] = lifeline_pair();
  ChildProcess host = start_supervisor_process(path, theirs.get());
  parts_ = std::make_unique<Parts>(Parts{std::move(mine), std::move(host)});
}

SupervisorProcess::SupervisorProcess(std::unique_ptr<Parts> parts) noexcept : parts_(std::move(parts)) {}

SupervisorProcess SupervisorProcess::forked(int (*host_main)(int lifeline_fd)) {
  auto [mine, theirs] = lifeline_pair();
  try {
    ChildProcess host = ChildProcess::fork_call(host_main, theirs.get(), "davincirun-supervisor");
    return SupervisorProcess(std::make_unique<Parts>(Parts{std::move(mine), std::move(host)}));
  } catch (const SystemError& e) {
    throw ConfigError(
        fmt::format("cannot start the job supervisor process (a fork of this one): {}", std::strerror(e.os_errno())));
  }
}

SupervisorProcess::SupervisorProcess(SupervisorProcess&&) noexcept = default;
SupervisorProcess& SupervisorProcess::operator=(SupervisorProcess&&) noexcept = default;

SupervisorProcess::~SupervisorProcess() {
  if (!parts_) return;
  parts_->lifeline.reset();  // before any job: it ends at once
  try {
    parts_->host.reap();
  } catch (const std::exception&) {
    parts_.reset();  // waitid failed: its ChildProcess kills and reaps it
  }
}

struct Job::Connection {
  UniqueFd lifeline;
  ChildProcess host;
  detail::FrameReader reader;
  Connection(UniqueFd fd, ChildProcess child)
      : lifeline(std::move(fd)), host(std::move(child)), reader(lifeline.get()) {}
};

Job::Job(const LaunchPlan& plan, LineSink& console) : console_(&console) {
  start(plan, ConsoleTarget::none, SupervisorProcess(plan.options.supervisor_program));
}

Job::Job(const LaunchPlan& plan, ConsoleTarget console) {
  start(plan, console, SupervisorProcess(plan.options.supervisor_program));
}

Job::Job(const LaunchPlan& plan, ConsoleTarget console, SupervisorProcess supervisor) {
  start(plan, console, std::move(supervisor));
}

void Job::start(const LaunchPlan& plan, ConsoleTarget target, SupervisorProcess supervisor) {
  const std::unique_ptr<SupervisorProcess::Parts> parts = std::move(supervisor.parts_);
  if (!parts) throw std::logic_error("Job: the supervisor process was given to another job");
  lifeline_fd_ = parts->lifeline.get();
  connection_ = std::make_unique<Connection>(std::move(parts->lifeline), std::move(parts->host));

  const auto route = console_                         ? detail::ConsoleRoute::relay
                     : target == ConsoleTarget::stdio ? detail::ConsoleRoute::stdio
                                                      : detail::ConsoleRoute::none;
  try {
    if (!detail::write_frame(lifeline_fd_, detail::Frame::spec, detail::encode_spec(make_job_spec(plan, route)))) {
      throw Error("the job supervisor process exited before it got the job");
    }
    detail::Frame type{};
    std::string payload;
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
    connection_->lifeline.reset();  // the supervisor stops whatever it started
    lifeline_fd_ = -1;
    connection_->host.reap();
    connection_.reset();
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
  } catch (const std::exception&) {
    connection_.reset();  // waitid failed: its ChildProcess kills and reaps the supervisor
  }
}

pid_t Job::supervisor_pid() const noexcept { return connection_ ? connection_->host.pid() : -1; }

void Job::send_command(const char* bytes, std::size_t size) noexcept {
  const int fd = lifeline_fd_;
  if (fd < 0) return;
  // One send() of at most six bytes: atomic, async-signal-safe, no SIGPIPE.
  const ssize_t ignored = ::send(fd, bytes, size, MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)ignored;
}

void Job::request_stop() noexcept { send_command(&detail::command_stop, 1); }
void Job::request_kill() noexcept { send_command(&detail::command_kill, 1); }
void Job::request_kill_dropped() noexcept { send_command(&detail::command_drop, 1); }
void Job::request_stop_by_signal(int signal, pid_t sender) noexcept {
  if (signal <= 0 || signal >= 32) return;
  const auto pid = static_cast<std::uint32_t>(sender > 0 ? sender : 0);
  const char bytes[6] = {detail::command_stop_by_signal,        static_cast<char>(signal),
                         static_cast<char>(pid & 0xff),         static_cast<char>((pid >> 8) & 0xff),
                         static_cast<char>((pid >> 16) & 0xff), static_cast<char>(pid >> 24)};
  send_command(bytes, sizeof bytes);
}
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
      if (type == detail::Frame::result) {
        result = detail::decode_result(payload);
      } else if (type == detail::Frame::error) {
        error = payload;
      } else if (console_) {
        detail::deliver_console_frame(type, payload, *console_);
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
  throw Error(
      fmt::format("the job supervisor process (pid {}) ended with {} before reporting the result; every "
                  "rank still running was killed with it, and the kernel freed its devices{}",
                  host_pid, host_status.describe(),
                  swept ? fmt::format("; {} more process(es) of the job were still running and are killed", swept)
                        : std::string()));
}

}  // namespace davincirun
