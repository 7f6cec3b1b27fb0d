// `davincirun`: the command-line front end of the launcher.
//
// The ranks run under the job's supervisor process (see Job in job.hpp), so
// even SIGKILL of this process leaves nothing running. It is a forked copy
// of this program (supervisor/job_host.hpp), ready at once, unless
// DAVINCIRUN_SUPERVISOR names the davincirun-supervisor program to start.
// It owns the process's signals, which the library never touches, from the
// moment it starts (waiting for the rank table included): SIGINT, SIGTERM,
// SIGQUIT and SIGHUP stop the job gracefully. SIGHUP only when it was not
// ignored at start: `nohup davincirun ...` asks to survive a hangup. SIGINT
// stops even when it was ignored at start, as torchrun and msrun do: a
// script's `davincirun ... &` starts with SIGINT and SIGQUIT ignored (POSIX
// shells do that to background jobs when job control is off), and a later
// `kill -INT` is still somebody's request to stop. SIGPIPE is ignored so
// that a closed console (`davincirun ... | head`) never kills the launcher.
// SIGUSR1 and SIGUSR2 are forwarded to every rank's process group.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "davincirun/davincirun.hpp"
#include "dry_run.hpp"
#include "options.hpp"
#include "process/command_lookup.hpp"
#include "python_script.hpp"
#include "report_command.hpp"
#include "supervisor/job_host.hpp"

namespace {

std::atomic<davincirun::Job*> running_job{nullptr};
volatile sig_atomic_t stop_signal = 0;
volatile sig_atomic_t stop_sender = 0;

// Ctrl-C is a person's request: a second one kills at once. SIGTERM, SIGHUP
// and SIGQUIT come from a platform or an engine, which often signals every
// process of the job at once (srun, mpirun): one stop, the grace period kept.
void on_stop_signal(int sig, siginfo_t* info, void* /*context*/) {
  const pid_t sender = info != nullptr && info->si_code == SI_USER ? info->si_pid : 0;
  if (stop_signal == 0) {
    stop_signal = sig;
    stop_sender = sender;
  }
  davincirun::Job* job = running_job.load();
  if (job == nullptr) return;
  if (sig == SIGINT) {
    job->request_stop();
  } else {
    job->request_stop_by_signal(sig, sender);
  }
}

void on_forwarded_signal(int sig) {
  if (davincirun::Job* job = running_job.load()) job->forward_signal(sig);
}

void install_signal_handlers() {
  struct sigaction sa{};
  sa.sa_sigaction = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_SIGINFO;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    struct sigaction old{};
    ::sigaction(sig, nullptr, &old);
    if (sig == SIGHUP && old.sa_handler == SIG_IGN) continue;  // nohup: survive the hangup
    ::sigaction(sig, &sa, nullptr);
  }
  sa.sa_flags = SA_RESTART;
  sa.sa_handler = on_forwarded_signal;
  for (int sig : {SIGUSR1, SIGUSR2}) {
    struct sigaction old{};
    ::sigaction(sig, nullptr, &old);
    if (old.sa_handler == SIG_IGN) continue;
    ::sigaction(sig, &sa, nullptr);
  }
  ::signal(SIGPIPE, SIG_IGN);
}

void say(const std::string& text) {
  std::string line = "davincirun: " + text + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

int verbosity = 1;

// Forked while this process has one thread (before the plan: planning
// starts none), or the program named.
davincirun::SupervisorProcess start_supervisor(const davincirun::LaunchOptions& options) {
  if (options.supervisor_program.empty() && !davincirun::Environment::current().get("DAVINCIRUN_SUPERVISOR")) {
    return davincirun::SupervisorProcess::forked(davincirun::detail::run_job_host);
  }
  return davincirun::SupervisorProcess(options.supervisor_program);
}

// A stop signal before the job started: nothing to stop, nothing left
// (lifecycle.hpp: a stop in waiting_for_table or planning).
struct StoppedBeforeStart {
  davincirun::JobState state;
};

void stop_if_signalled(davincirun::JobState state) {
  if (stop_signal != 0) throw StoppedBeforeStart{state};
}

// A test's hold of `planning` (DAVINCIRUN_TEST_HOLD): a stop signal ends it.
void hold_planning() {
  const auto hold = davincirun::test_hold_from_environment();
  if (!hold || hold->state != davincirun::JobState::planning) return;
  say(fmt::format("holding the job in planning for {} ms (DAVINCIRUN_TEST_HOLD)", hold->duration.count()));
  const auto deadline = std::chrono::steady_clock::now() + hold->duration;
  while (stop_signal == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void inform(const std::string& text) {
  if (verbosity >= 1) say(text);
}

int run(const davincirun::cli::CliOptions& cli) {
  using namespace davincirun;
  verbosity = cli.verbosity;
  install_signal_handlers();  // before the wait for the rank table: every state answers a stop
  for (const auto& note : cli.notes) inform(note);
  Environment inherited = Environment::current();
  inherited.unset("DAVINCIRUN_PYTHON");  // the launcher's own choice (python_interpreter()), not the ranks'
  LaunchOptions options = cli.launch;
  // Watched: a person's terminal on either stream (`davincirun ... | tee
  // out.txt` keeps stderr on it). A batch job's file or pipe is not.
  options.output_watched = ::isatty(STDOUT_FILENO) == 1 || ::isatty(STDERR_FILENO) == 1;
  std::string python_note;  // said once the plan stands: a job that cannot start runs nothing
  if (cli::is_unexecutable_python_script(options.command, options.work_dir)) {
    if (auto python = cli::python_interpreter(Environment::current(), cli::self_executable(), cli::wheel_python)) {
      python_note = fmt::format("{} is a Python script without execute permission: running it with {}",
                                options.command[0], *python);
      options.command.insert(options.command.begin(), *python);
    }
  }
  options.progress = [](const std::string& line) { inform(line); };
  options.keep_waiting = [] { stop_if_signalled(JobState::waiting_for_table); };
  options.no_wait_setting = "--wait-timeout 0";
  options.supervisor.stop_request_name = "Ctrl-C";  // a second one kills at once
  options.supervisor.launcher_name = "davincirun";
  options.supervisor.quiet = verbosity == 0;
  // The supervisor process starts while the plan is made (another core);
  // one that cannot start is reported where a Job would report it, after
  // the plan's own errors.
  std::optional<SupervisorProcess> early_supervisor;
  if (!cli.dry_run) {
    try {
      early_supervisor.emplace(start_supervisor(options));
    } catch (const ConfigError&) {
      early_supervisor.reset();  // the Job below tries again and says why
    }
  }
  LaunchPlan plan = plan_launch(options, inherited);
  hold_planning();
  if (!python_note.empty()) inform(python_note);
  for (const auto& warning : plan.warnings) say("warning: " + warning);
  if (cli.dry_run) {
    std::string text = cli::describe_plan(plan, options.command, inherited);
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    // Would the job start? Devices another job holds make it exit 2, as the
    // real start would (DeviceBusyError), but nothing is locked here.
    if (!plan.device_lock_dir.empty()) {
      std::vector<int> devices;
      for (const RankAssignment& a : plan.ranks) {
        if (a.role == ProcessRole::rank) devices.push_back(a.physical_device_id);
      }
      check_devices_free(plan.device_lock_dir, devices);
    }
    return 0;
  }
  const RankTableServer& server = plan.table.servers[plan.server_index];
  stop_if_signalled(JobState::planning);
  // The job's supervisor process writes the ranks' lines to our stdout and
  // its notices to our stderr itself, through a queue: a console that is
  // not being read (a paused pager, Ctrl-S) never slows the ranks.
  Job job(plan, ConsoleTarget::stdio, early_supervisor ? std::move(*early_supervisor) : start_supervisor(options));
  running_job.store(&job);
  if (stop_signal == SIGINT) job.request_stop();  // a signal that came during start-up
  if (stop_signal != 0 && stop_signal != SIGINT) job.request_stop_by_signal(stop_signal, stop_sender);
  const std::size_t ranks = static_cast<std::size_t>(plan.job.local_world_size);
  const char* scheduler = plan.ranks.size() > ranks ? " and MindSpore's scheduler" : "";
  inform(fmt::format("job {}: {} rank(s){} on server {} (world size {}), logs in {}", plan.job.job_id, ranks, scheduler,
                     server.server_id, plan.job.world_size, job.run_dir()));
  if (verbosity >= 2) {
    say(fmt::format("this machine is server {}: {}", server.server_id, plan.server_reason));
    say(fmt::format("job supervisor process: pid {} (tracking exits with {})", job.supervisor_pid(),
                    to_string(job.tracking())));
    const auto& pids = job.pids();
    for (std::size_t i = 0; i < plan.ranks.size(); ++i) {
      const RankAssignment& a = plan.ranks[i];
      if (a.role == ProcessRole::scheduler) {
        say(fmt::format("scheduler (pid {}): MindSpore's dynamic-cluster scheduler, no device", pids[i]));
        continue;
      }
      say(fmt::format("rank {} (pid {}): physical device {}, logical device {}", a.rank, pids[i], a.physical_device_id,
                      a.logical_device_id));
    }
  }
  JobResult result = job.wait();  // every queued line has reached the terminal
  running_job.store(nullptr);

  for (const auto& r : result.ranks) {
    if (r.log_error)
      say(fmt::format("warning: the log of {} is incomplete ({}): {}", process_name(r.role, r.rank), r.log_path,
                      *r.log_error));
  }
  if (result.success()) {
    const std::size_t restarts = result.attempts.empty() ? 0 : result.attempts.size() - 1;
    inform(fmt::format(
        "all {} rank(s){} exited 0{}; logs in {}", ranks, scheduler,
        restarts == 0 ? std::string() : fmt::format(" in attempt {}, after {} restart(s)", restarts + 1, restarts),
        job.run_dir()));
    return 0;
  }
  std::string report = failure_report(result);
  ssize_t ignored = ::write(STDERR_FILENO, report.data(), report.size());
  (void)ignored;
  // The first stop names the status (summary.json's exit_code): a signal
  // that names it gives 128+N there; one that came after another stop (the
  // job timeout, another server's) changes nothing.
  return result.exit_code();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace davincirun;
  try {
    if (cli::is_report_command(argc, argv)) return cli::run_report_command(argc, argv);
    cli::CliOptions cli = cli::parse_command_line(argc, argv);
    if (cli.help) {
      std::fputs(cli::usage_text().c_str(), stdout);
      return 0;
    }
    if (cli.version) {
      std::printf("davincirun %s\n", version());
      return 0;
    }
    if (cli.tables.active()) return cli::run_table_tool(cli);
    return run(cli);
  } catch (const StoppedBeforeStart& e) {
    say(fmt::format("stopped by {} while {}: nothing was started",
                    ExitStatus{ExitStatus::Kind::signaled, stop_signal}.describe(),
                    e.state == JobState::waiting_for_table ? "waiting for the rank table" : "planning the job"));
    return 128 + stop_signal;
  } catch (const cli::UsageError& e) {
    say(e.what());
    return 2;
  } catch (const OptionError& e) {
    say(cli::flag_message(e));
    return 2;
  } catch (const ConfigError& e) {
    say(e.what());
    return 2;
  } catch (const RankTableError& e) {
    say(fmt::format("unusable rank table: {}", e.what()));
    return 2;
  } catch (const SpawnError& e) {
    say(e.what());
    // The message names the first directories of PATH only.
    if (verbosity >= 2 && !e.search_path().empty()) {
      say("PATH searched: " + e.search_path());
    } else if (detail::path_directory_count(e.search_path()) > detail::path_directories_shown + 1) {
      say("(davincirun -v prints the whole PATH)");
    }
    return e.exit_code();
  } catch (const std::exception& e) {
    say(e.what());
    return 1;
  }
}
