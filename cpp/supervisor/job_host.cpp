// run_job_host(): one job, from its spec to its result, in the order the
// steps happen.
#include "job_host.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "common/linux_compat.hpp"
#include "common/random_bytes.hpp"
#include "common/remove_tree.hpp"
#include "common/text.hpp"
#include "davincirun/device_lock.hpp"
#include "davincirun/environment.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/plan.hpp"
#include "davincirun/report.hpp"
#include "davincirun/restart_policy.hpp"
#include "davincirun/root_cause.hpp"
#include "davincirun/supervisor.hpp"
#include "davincirun/unique_fd.hpp"
#include "job/job_protocol.hpp"
#include "job_console.hpp"
#include "job_journal.hpp"
#include "job_peers.hpp"
#include "job_summary.hpp"
#include "lifeline.hpp"
#include "output/job_progress.hpp"
#include "platform_dirs.hpp"
#include "process/descendants.hpp"
#include "process/fd_limit.hpp"
#include "process/tracking.hpp"
#include "record_writer.hpp"
#include "run_dir.hpp"
#include "stack_dump.hpp"

namespace davincirun::detail {

namespace {

// What the ranks leave running after a failed start or a broken event loop
// is SIGKILLed within this time.
constexpr std::chrono::seconds cleanup_budget{5};

int prepare_process() {
  sigset_t mask;
  sigemptyset(&mask);
  for (const int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&mask, sig);
  ::pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  // A console that went away (EPIPE) or a log file over RLIMIT_FSIZE
  // (EFBIG) is an error to report, never a reason to die.
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGXFSZ, SIG_IGN);
  // Orphans anywhere below this process come back to it instead of init:
  // that is what lets the final sweep find a double-forked daemon. Returns
  // the errno when refused (qemu-user, a seccomp filter).
  return become_child_subreaper();
}

// Said once, when the ranks have started: what a refused subreaper costs.
std::string subreaper_notice(int error) {
  return fmt::format(
      "PR_SET_CHILD_SUBREAPER was refused with {}, as qemu-user or a seccomp filter do: a process a rank "
      "detaches (a double-forked daemon) goes to init, and the end of the job finds it only by the "
      "DAVINCIRUN_JOB_TAG in its environment",
      errno_text(error));
}

// 128 random bits, hex: marks every process of this job (DAVINCIRUN_JOB_TAG),
// so the launcher can still find them should this process be killed.
std::string random_tag() {
  std::string out;
  for (const char b : random_bytes(16)) out += fmt::format("{:02x}", static_cast<unsigned char>(b));
  return out;
}

std::vector<std::string> rank_labels(const JobSpec& spec) {
  std::vector<std::string> labels;
  for (const RankAssignment& a : spec.ranks) labels.push_back(process_label(a));
  return labels;
}

// First, before anything is created: a job refused because another one holds
// a device leaves nothing behind, not even a log directory.
std::optional<DeviceLocks> lock_devices(const JobSpec& spec) {
  if (spec.device_lock_dir.empty()) return std::nullopt;
  std::vector<int> devices;
  for (const RankAssignment& a : spec.ranks) {
    if (a.role == ProcessRole::rank) devices.push_back(a.physical_device_id);
  }
  return DeviceLocks(spec.device_lock_dir, devices, DeviceLockHolder{spec.job_id, spec.command});
}

// Where the stall watchdog writes the ranks' stacks: one folder per attempt.
std::string stacks_dir(const Supervisor& supervisor) {
  return supervisor.attempt() == 1 ? std::string("/stacks") : fmt::format("/stacks.attempt{}", supervisor.attempt());
}

// The processes of attempt `attempt` (1: the first run): a later one has
// new logs, the restart count and its own rendezvous ports (AttemptPorts).
std::vector<RankLaunch> launches_for(const JobSpec& spec, const RunDir& run_dir, const std::string& tag,
                                     PlatformDirs& platform, int attempt) {
  std::vector<std::pair<std::string, std::string>> ports;
  if (attempt > 1) {
    for (const auto& name : spec.attempt_ports.names) {
      ports.emplace_back(name, std::to_string(port_for_attempt(spec.attempt_ports, spec.job_id, name, attempt)));
    }
  }
  std::vector<RankLaunch> launches;
  for (std::size_t i = 0; i < spec.ranks.size(); ++i) {
    const RankAssignment& a = spec.ranks[i];
    RankLaunch launch;
    launch.role = a.role;
    launch.rank = a.rank;
    launch.label = process_label(a);
    launch.log_path = run_dir.log_path(a, attempt);
    launch.show_on_console = true;  // JobProgress reads every rank's lines and shows those asked for
    launch.process.argv = spec.command;
    Environment env(spec.environments[i]);
    // The plan leaves it out where the ranks must not see it (launch mode cm).
    if (env.get("RANK_TABLE_FILE")) env.set("RANK_TABLE_FILE", run_dir.table_path());
    env.set("DAVINCIRUN_JOB_TAG", tag);
    if (attempt > 1) {
      const std::string restarts = std::to_string(attempt - 1);
      env.set("DAVINCIRUN_RESTART_COUNT", restarts);
      if (a.role == ProcessRole::rank) env.set("TORCHELASTIC_RESTART_COUNT", restarts);
      for (const auto& [name, port] : ports) {
        if (env.get(name)) env.set(name, port);  // the scheduler has no MASTER_PORT
      }
    }
    // torch's @record writes the rank's exception there, read first by the report.
    if (a.role == ProcessRole::rank) {
      env.set("TORCHELASTIC_ERROR_FILE", torch_error_file_for(launch.log_path));
      env.set("DAVINCIRUN_METRICS_FILE", run_dir.metrics_path(a.rank));  // davincirunsdk.log_metric()
    }
    platform.prepare(env, a.rank);  // CANN's and MindSpore's directories (platform_environment.hpp)
    launch.process.env = env.entries();
    launch.process.work_dir = spec.work_dir;
    launches.push_back(std::move(launch));
  }
  return launches;
}

std::unique_ptr<Supervisor> start_ranks(const JobSpec& spec, const RunDir& run_dir, const std::string& tag,
                                        LineSink& console, PlatformDirs& platform, int first_attempt) {
  auto supervisor = std::make_unique<Supervisor>(launches_for(spec, run_dir, tag, platform, first_attempt),
                                                 spec.supervisor, console, first_attempt);
  if (spec.supervisor.max_restarts > 0) {
    Restarts restarts;
    restarts.judge = [&spec](const JobResult& attempt, const std::string& ruled_out_by) {
      return judge_attempt(attempt, ruled_out_by, spec.supervisor);
    };
    restarts.launches = [&spec, &run_dir, tag, &platform](int attempt) {
      return launches_for(spec, run_dir, tag, platform, attempt);
    };
    supervisor->set_restarts(std::move(restarts));
  }
  return supervisor;
}

// The job's own outcome stands when its summary cannot be written: the
// missing summary is reported beside it.
void write_summary(const JobSpec& spec, const RunDir& run_dir, JobResult& result, LineSink& console) {
  try {
    write_job_summary(run_dir.summary_path(), spec, run_dir.table_path(), result);
  } catch (const SystemError& e) {
    result.summary_error = std::strerror(e.os_errno());
  } catch (const std::exception& e) {
    result.summary_error = e.what();
  }
  if (result.summary_error) {
    console.notice(
        notice_line(fmt::format("cannot write the job summary {}: {}", run_dir.summary_path(), *result.summary_error)));
  }
}

// What the supervisor's watch of the output needs: each rank's label and
// whether its lines are shown.
JobProgress::Options progress_options(const JobSpec& spec) {
  JobProgress::Options o;
  o.labels = rank_labels(spec);
  for (std::size_t i = 0; i < spec.ranks.size(); ++i) {
    o.shown.push_back(i >= spec.show_on_console.size() || spec.show_on_console[i]);
  }
  o.server_id = spec.server_id;
  o.slow_window = spec.supervisor.slow_window;
  return o;
}

// A test's hold of `starting` (SupervisorOptions::hold), the ranks started:
// they run once it is over, or at once when a command or a stop signal is
// waiting, which is then taken as soon as they run.
void hold_while_starting(const SupervisorOptions& options, int lifeline_fd, LineSink& console) {
  if (options.hold_state != JobState::starting || options.hold.count() <= 0) return;
  console.notice(
      notice_line(fmt::format("holding the job in starting for {} ms (DAVINCIRUN_TEST_HOLD)", options.hold.count())));
  const auto deadline = std::chrono::steady_clock::now() + options.hold;
  while (std::chrono::steady_clock::now() < deadline && !stop_arrived(lifeline_fd, 20)) {}
}

// What the job's supervisor needs of the options the spec does not carry.
void complete_options(JobSpec& spec) {
  spec.supervisor.owns_all_children = true;
  // A job of one server watches for a stall itself; several servers leave
  // it to the hub, which hears every server's silence.
  if (!spec.peers.enabled) spec.supervisor.stall_timeout = spec.peers.stall_timeout;
  if (const auto hold = test_hold_from_environment()) {
    spec.supervisor.hold_state = hold->state;
    spec.supervisor.hold = hold->duration;
  }
}

// Removes LaunchOptions::remove_after_job at every return of run_job_host:
// after the ranks and their descendants are gone.
struct RemoveAfterJob {
  const std::vector<std::string>& paths;
  ~RemoveAfterJob() {
    for (const auto& path : paths) remove_tree(path);
  }
};

}  // namespace

int run_job_host(int lifeline_fd) {
  const int subreaper_refused = prepare_process();
  FrameReader reader(lifeline_fd);
  Frame type{};
  std::string payload;
  JobSpec spec;
  try {
    if (!reader.next(type, payload) || type != Frame::spec) return 2;
    spec = decode_spec(payload);
  } catch (const std::exception&) {
    return 2;
  }
  const RemoveAfterJob remove_after_job{spec.remove_after_job};
  Lifeline lifeline(lifeline_fd);
  JobConsole console(spec.console, lifeline, rank_labels(spec));
  // Held until this process exits, after every rank and everything they
  // started is gone; the kernel releases them if it dies.
  std::optional<DeviceLocks> locks;
  std::optional<RunDir> run_dir;
  std::optional<PlatformDirs> platform;
  std::optional<JobProgress> progress;  // the ranks' console: it outlives the supervisor
  std::unique_ptr<Supervisor> supervisor;
  std::unique_ptr<JobPeers> peers;  // after the supervisor: destroyed (its thread ended) first
  std::string tag;
  // Ends a job that failed to start or whose event loop broke, and says why.
  const auto abandon = [&](const std::exception& e, bool never_ran) {
    peers.reset();
    supervisor.reset();  // kills and reaps the ranks
    kill_all_descendants(cleanup_budget);
    // Not a subreaper: what the ranks detached is found by the job's tag only.
    if (subreaper_refused != 0 && !tag.empty()) kill_tagged_processes(spec.supervisor.job_tag, cleanup_budget);
    // A job that never ran leaves no run directory behind.
    if (never_ran && platform) platform->discard();
    if (never_ran && run_dir) run_dir->discard(spec.ranks);
    console.flush();
    lifeline.send(Frame::error, encode_error(e));
    return 1;
  };
  std::optional<JobJournal> journal;
  bool started_early = false;  // a member awaiting its start told the launcher before any rank ran
  try {
    complete_options(spec);
    tag = random_tag();
    spec.supervisor.job_tag = "DAVINCIRUN_JOB_TAG=" + tag;
    // Before the device locks, a descriptor each; the hub's one socket per other server too.
    make_room_for_ranks(spec.ranks.size(), spec.peers.enabled && spec.peers.hub && spec.peers.server_count > 1
                                               ? spec.peers.server_count - 1
                                               : 0);
    locks = lock_devices(spec);
    run_dir.emplace(spec.log_dir, spec.job_id, spec.rank_table_json, spec.peers.server_count > 1);
    platform.emplace(PlatformPaths{run_dir->path(), spec.cache_dir});
    // The hub's port is bound before any rank starts: taken, the job never runs.
    if (JobPeers::wanted(spec.peers)) peers = std::make_unique<JobPeers>(spec, console.sink());
    // A member of a job that restarts starts as the attempt the hub names:
    // started again after its server was lost, it rejoins the job under way.
    // The launcher hears "started" first (no process yet), so that it
    // waits as for a running job and passes a stop on at once.
    int attempt = 1;
    if (peers && peers->awaits_start()) {
      run_dir->point_latest();
      lifeline.send(Frame::started, encode_started({run_dir->path(), tag, {}, resolve_tracking(spec.supervisor)}));
      started_early = true;
      attempt = peers->await_start(lifeline_fd);
    }
    progress.emplace(console.sink(), progress_options(spec));
    supervisor = start_ranks(spec, *run_dir, tag, *progress, *platform, attempt);
    // Said once the ranks started and before any line of theirs, which the
    // supervisor reads only when it runs (a notice posted to it would land
    // wherever their output has got to).
    if (!spec.supervisor.quiet) {
      for (const auto& note : spec.notes) console.sink().notice(notice_line(note));
    }
    supervisor->set_ticker([&progress] { progress->tick(); }, std::chrono::seconds(1));
    if (started_early) console.sink().attempt_started(attempt, supervisor->pids());
    if (peers) {
      peers->set_part_maker([&](const JobResult& so_far) {
        return part_for_hub(spec, record_input(spec, *run_dir, so_far, journal ? &*journal : nullptr, &*progress));
      });
      peers->watch_pace(*progress);
      peers->start(*supervisor, run_dir->path(), rank_labels(spec));
    } else if (spec.supervisor.stall_timeout.count() > 0) {
      ServerLink link;
      link.before_stall_stop = [&spec, &run_dir, ranks = supervisor.get()](const std::string& why) {
        return fmt::format("{}: {}", why,
                           dump_python_stacks(ranks->pids(), rank_labels(spec), run_dir->path() + stacks_dir(*ranks)));
      };
      supervisor->set_server_link(std::move(link));
    }
    journal.emplace(run_dir->events_path());
    supervisor->set_journal([&journal](const std::string& line) { journal->write(line); });
    progress->set_journal([&journal](const std::string& line) { journal->write(line, false); });
    for (const auto& note : spec.notes) journal->write(note);
    for (const auto& dir : platform->removed_after_job()) spec.remove_after_job.push_back(dir);
  } catch (const std::exception& e) {
    return abandon(e, !started_early);
  }
  run_dir->point_latest();
  if (subreaper_refused != 0) console.sink().notice(notice_line(subreaper_notice(subreaper_refused)));
  if (!started_early) {
    lifeline.send(Frame::started, encode_started({run_dir->path(), tag, supervisor->pids(), supervisor->tracking()}));
  }

  hold_while_starting(spec.supervisor, lifeline_fd, console.sink());
  JobResult result;
  try {
    const CommandListener listener(lifeline_fd, reader.take_buffered(), *supervisor);
    result = supervisor->run();
    if (peers) peers->stop();
    platform->prune_empty();
  } catch (const std::exception& e) {
    // The event loop itself failed (epoll, signalfd): nothing to recover.
    return abandon(e, false);
  }
  write_summary(spec, *run_dir, result, console.sink());
  write_record(spec, *run_dir, record_input(spec, *run_dir, result, journal ? &*journal : nullptr, &*progress),
               peers.get(), console.sink());
  console.flush();  // every line reaches the launcher before the result
  lifeline.send(Frame::result, encode_result(result));
  return 0;
}

}  // namespace davincirun::detail
