// Supervisor: ranks started from tiny helper programs (tests/cpp/helpers),
// each test under a watchdog deadline and ending with proof that nothing it
// started is left running. Every test runs in each supervision mode (pidfd or
// SIGCHLD tracking, owning every child of this process or not); see
// test_supervisor_support.hpp.
#include <catch2/catch.hpp>

#include <algorithm>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <sstream>
#include <tuple>

#include "davincirun/errors.hpp"
#include "davincirun/supervisor.hpp"
#include "helpers/pattern.hpp"
#include "test_supervisor_support.hpp"

using namespace davincirun;
using namespace davincirun_test;
using Catch::Matchers::Contains;
using Kind = ExitStatus::Kind;

TEST_CASE("ranks that all exit 0 make a successful job", "[supervisor]") {
  FOR_EACH_SUPERVISION_MODE(mode, Modes::all);
  TempDir dir;
  RecordingSink console;
  std::vector<RankLaunch> ranks;
  for (int i = 0; i < 4; ++i) {
    ranks.push_back(launch(dir, i, {helper("child_exit"), "0", "0", "hello from " + std::to_string(i)}));
  }
  Supervisor sup(ranks, mode.options(), console);
  CHECK(sup.tracking() == mode.tracking);
  const std::vector<pid_t> pids = sup.pids();
  REQUIRE(pids.size() == 4);
  const auto [result, elapsed] = run_with_deadline(sup);

  CHECK(result.tracking == mode.tracking);
  CHECK(result.leftover_processes_killed == 0);
  CHECK(result.success());
  CHECK(result.exit_code() == 0);
  CHECK(result.stop_reason == StopReason::none);
  CHECK_FALSE(result.first_failure);
  REQUIRE(result.ranks.size() == 4);
  for (int i = 0; i < 4; ++i) {
    const RankResult& r = result.ranks[static_cast<std::size_t>(i)];
    const std::string said = "hello from " + std::to_string(i) + "\n";
    INFO("rank " << i);
    CHECK(r.rank == i);
    CHECK(r.pid == pids[static_cast<std::size_t>(i)]);
    check_status(r.status, Kind::exited, 0);
    CHECK_FALSE(r.terminated_by_launcher);
    CHECK_FALSE(r.killed_by_launcher);
    CHECK(r.log_path == ranks[static_cast<std::size_t>(i)].log_path);
    CHECK(read_file(r.log_path) == said);
    CHECK(r.output_bytes == said.size());
    CHECK_FALSE(r.log_error);
    CHECK(r.started <= r.ended);
    CHECK_THAT(console.text(), Contains("[rank " + std::to_string(i) + "] " + said));
  }
  for (const auto& call : console.calls()) CHECK((!call.empty() && call.back() == '\n'));
  // Each rank's exit is announced once, after its output.
  const std::vector<std::string> events = console.events();
  for (int i = 0; i < 4; ++i) {
    const std::string exit = "exit " + std::to_string(i) + ": exit code 0";
    CHECK(std::count(events.begin(), events.end(), exit) == 1);
    const auto said = std::find(events.begin(), events.end(),
                                "lines [rank " + std::to_string(i) + "] hello from " + std::to_string(i) + "\n");
    CHECK(said < std::find(events.begin(), events.end(), exit));
  }
  check_nothing_left(result);
}

TEST_CASE("a failing rank stops the others with SIGTERM at once", "[supervisor]") {
  FOR_EACH_SUPERVISION_MODE(mode, Modes::all);
  TempDir dir;
  RecordingSink console;
  std::vector<RankLaunch> ranks;
  for (int i = 0; i < 4; ++i) {
    ranks.push_back(i == 2 ? launch(dir, i, {helper("child_exit"), "3", "200", "bye"})
                           : launch(dir, i, {helper("child_sleep"), "60"}));
  }
  const SupervisorOptions options = mode.options({10s, default_drain_timeout});
  Supervisor sup(ranks, options, console);
  const auto [result, elapsed] = run_with_deadline(sup);

  CHECK(elapsed < options.grace_period);  // SIGTERM ended the sleepers, not SIGKILL
  CHECK_FALSE(result.success());
  CHECK(result.stop_reason == StopReason::rank_failed);
  REQUIRE(result.first_failure == std::optional<std::size_t>(2));
  CHECK(result.exit_code() == 3);
  REQUIRE(result.ranks.size() == 4);
  check_status(result.ranks[2].status, Kind::exited, 3);
  CHECK_FALSE(result.ranks[2].terminated_by_launcher);
  for (std::size_t i : {0u, 1u, 3u}) {
    INFO("rank " << i);
    check_status(result.ranks[i].status, Kind::signaled, SIGTERM);
    CHECK(result.ranks[i].terminated_by_launcher);
    CHECK_FALSE(result.ranks[i].killed_by_launcher);
  }
  // The rank's last words reach the console before the verdict on it.
  const std::string text = console.text();
  const auto words = text.find("[rank 2] bye\n");
  const auto verdict = text.find("rank 2 (pid " + std::to_string(result.ranks[2].pid) + ") failed with exit code 3");
  REQUIRE(words != std::string::npos);
  REQUIRE(verdict != std::string::npos);
  CHECK(words < verdict);
  // Exits as they happened: the failure first, then the ranks it stopped.
  std::vector<std::string> exits;
  for (const auto& e : console.events()) {
    if (e.rfind("exit ", 0) == 0) exits.push_back(e);
  }
  REQUIRE(exits.size() == 4);
  CHECK(exits[0] == "exit 2: exit code 3");
  for (std::size_t i : {0u, 1u, 3u}) {
    CHECK(std::count(exits.begin(), exits.end(), "exit " + std::to_string(i) + ": signal 15 (SIGTERM) (stopped)") == 1);
  }
  check_nothing_left(result);
}

TEST_CASE("a crashing rank: signal reported the shell's way, every byte it wrote in its log", "[supervisor]") {
  FOR_EACH_SUPERVISION_MODE(mode, Modes::all);
  TempDir dir;
  NullLineSink console;
  constexpr std::size_t size = 5 * 1024 * 1024;
  Supervisor sup({launch(dir, 0, {helper("child_write"), std::to_string(size), std::to_string(SIGSEGV)})},
                 mode.options(), console);
  const auto [result, elapsed] = run_with_deadline(sup);

  REQUIRE(result.ranks.size() == 1);
  const ExitStatus& status = result.ranks[0].status;
  check_status(status, Kind::signaled, SIGSEGV);
  CHECK(status.shell_code() == 139);
  CHECK_THAT(status.describe(), Contains("SIGSEGV"));
  CHECK_FALSE(result.success());
  CHECK(result.first_failure == std::optional<std::size_t>(0));
  CHECK(result.stop_reason == StopReason::rank_failed);
  CHECK(result.exit_code() == 139);

  CHECK(result.ranks[0].output_bytes == size);
  CHECK_FALSE(result.ranks[0].log_error);
  const std::string log = read_file(result.ranks[0].log_path);
  CHECK(log.size() == size);
  CHECK((log == pattern_bytes(size)));  // not CHECK(a == b): 5 MB in a failure message
  check_nothing_left(result);
}

// SIGCHLD set to SIG_IGN makes the kernel reap every child at once, so
// neither waitid() nor the owns_all_children reaping can see a status: a
// process that owns all its children must never ignore SIGCHLD (the
// davincirun-supervisor process blocks it and reads it from a signalfd). The
// two tests of such a host run only in the modes that do not own every child.
TEST_CASE("a host ignoring SIGCHLD gets an unknown status, counted as a failure", "[supervisor]") {
  FOR_EACH_SUPERVISION_MODE(mode, Modes::not_owning);
  TempDir dir;
  NullLineSink console;
  std::optional<Outcome> outcome;
  {
    SignalDisposition auto_reap(SIGCHLD, SIG_IGN);  // the kernel reaps children itself
    Supervisor sup({launch(dir, 0, {helper("child_exit"), "0", "500", "done"})}, mode.options(), console);
    outcome = run_with_deadline(sup);
  }
  const JobResult& result = outcome->result;
  REQUIRE(result.ranks.size() == 1);
  CHECK(result.ranks[0].status.kind == Kind::unknown);
  CHECK(result.ranks[0].status.shell_code() == 255);
  CHECK_THAT(result.ranks[0].status.describe(), Contains("unknown"));
  CHECK(read_file(result.ranks[0].log_path) == "done\n");
  CHECK_FALSE(result.success());
  CHECK(result.exit_code() == 255);
  check_nothing_left(result);
}

// With SIGCHLD ignored the kernel reaps a rank that exits at once, possibly
// before spawn() returns: the pidfd must come from clone() itself.
TEST_CASE("a host ignoring SIGCHLD can start ranks that exit at once", "[supervisor]") {
  FOR_EACH_SUPERVISION_MODE(mode, Modes::not_owning);  // see above
  TempDir dir;
  NullLineSink console;
  for (int round = 0; round < 10; ++round) {
    std::vector<RankLaunch> ranks;
    for (int i = 0; i < 8; ++i) {
      ranks.push_back(launch(dir, round * 8 + i, {helper("child_exit"), "0"}));
    }
    SignalDisposition auto_reap(SIGCHLD, SIG_IGN);
    try {
      Supervisor sup(ranks, mode.options(), console);
      const JobResult result = run_with_deadline(sup).result;
      for (const auto& r : result.ranks) CHECK(r.status.kind == Kind::unknown);
    } catch (const std::exception& e) {
      FAIL_CHECK("round " << round << ": " << e.what());
      break;
    }
  }
  CHECK(no_children_left());
}

TEST_CASE("request_stop() stops the job: SIGTERM, then SIGKILL after the grace period or a second request",
          "[supervisor]") {
  FOR_EACH_SUPERVISION_MODE(mode, Modes::all);
  TempDir dir;
  RecordingSink console;
  std::vector<std::string> argv{helper("child_sleep"), "60"};
  int requests = 1;
  SupervisorOptions options = mode.options({30s, default_drain_timeout});
  int expected_signal = SIGKILL;
  SECTION("ranks that obey SIGTERM") { expected_signal = SIGTERM; }
  SECTION("ranks ignoring SIGTERM: SIGKILL once the grace period is over") {
    argv.push_back("ignore-term");
    options.grace_period = 300ms;
  }
  SECTION("ranks ignoring SIGTERM: a second request SIGKILLs at once") {
    argv.push_back("ignore-term");
    requests = 2;
  }
  std::vector<RankLaunch> ranks;
  for (int i = 0; i < 3; ++i) ranks.push_back(launch(dir, i, argv));
  Supervisor sup(ranks, options, console);
  Joined stopper([&] {
    // Once every rank is ready (after it set SIGTERM to be ignored).
    if (!console.wait_for("] ready\n", 3, 20s)) return;
    for (int i = 0; i < requests; ++i) sup.request_stop();
  });
  const auto [result, elapsed] = run_with_deadline(sup);

  if (options.grace_period == 30s) CHECK(elapsed < options.grace_period);
  CHECK(result.stop_reason == StopReason::requested);
  CHECK_FALSE(result.first_failure);
  CHECK_FALSE(result.success());
  CHECK(result.exit_code() == 130);
  REQUIRE(result.ranks.size() == 3);
  for (const auto& r : result.ranks) {
    INFO("rank " << r.rank);
    check_status(r.status, Kind::signaled, expected_signal);
    CHECK(r.terminated_by_launcher);
    CHECK(r.killed_by_launcher == (expected_signal == SIGKILL));
  }
  CHECK_THAT(console.text(), Contains("[davincirun] stop requested"));
  check_nothing_left(result);
}

TEST_CASE("a rank that cannot start stops the job before it runs", "[supervisor]") {
  FOR_EACH_SUPERVISION_MODE(mode, Modes::all);
  TempDir dir;
  NullLineSink console;
  const std::string tag = unique_tag("spawn-failure");
  std::vector<RankLaunch> ranks{launch(dir, 0, {helper("child_sleep"), "60", tag}),
                                launch(dir, 1, {helper("child_exit"), "0"}),
                                launch(dir, 2, {helper("child_exit"), "0"})};
  RankLaunch& bad = ranks[1];
  auto file = [&dir](const std::string& name, const char* text, mode_t file_mode) {
    write_file(dir / name, text);
    REQUIRE(::chmod((dir / name).c_str(), file_mode) == 0);
    return dir / name;
  };
  int expected_errno = ENOENT;
  int expected_code = 127;
  SECTION("command not found in PATH") {
    bad.process.argv = {"davincirun-test-no-such-command"};
    bad.process.env = {"PATH=" + dir.path() + ":/usr/bin"};
  }
  SECTION("path that does not exist") { bad.process.argv = {dir / "missing"}; }
  SECTION("work directory that does not exist") { bad.process.work_dir = dir / "no-such-dir"; }
  SECTION("regular file without execute permission, as a path") {
    bad.process.argv = {file("script", "#!/bin/sh\n", 0644)};
    std::tie(expected_errno, expected_code) = std::pair(EACCES, 126);
  }
  SECTION("regular file without execute permission, found in PATH") {
    file("script", "#!/bin/sh\n", 0644);
    bad.process.argv = {"script"};
    bad.process.env = {"PATH=" + dir.path()};
    std::tie(expected_errno, expected_code) = std::pair(EACCES, 126);
  }
  SECTION("executable file that is not a program (no shell fallback)") {
    bad.process.argv = {file("garbage", "not a program\n", 0755)};
    std::tie(expected_errno, expected_code) = std::pair(ENOEXEC, 126);
  }
  std::optional<SpawnError> error;
  try {
    Supervisor sup(ranks, mode.options(), console);
  } catch (const SpawnError& e) {
    error = e;
  }
  REQUIRE(error);
  INFO("message: " << error->what());
  CHECK(error->rank() == 1);
  CHECK(error->os_errno() == expected_errno);
  CHECK(error->exit_code() == expected_code);
  CHECK_THAT(error->command(), Contains(bad.process.argv[0]));
  // A command looked up in PATH (a name, not a path) names the PATH searched.
  std::string searched;
  for (const auto& variable : bad.process.env) {
    if (variable.rfind("PATH=", 0) == 0) searched = variable.substr(5);
  }
  if (bad.process.argv[0].find('/') != std::string::npos) searched.clear();
  CHECK(error->search_path() == searched);
  CHECK(processes_with_arg(tag).empty());
  CHECK(no_children_left());
  CHECK(::access(ranks[2].log_path.c_str(), F_OK) != 0);  // rank 2 never started
}

TEST_CASE("a log file that cannot be created stops the job before it runs", "[supervisor]") {
  FOR_EACH_SUPERVISION_MODE(mode, Modes::all);
  TempDir dir;
  NullLineSink console;
  const std::string tag = unique_tag("log-failure");
  std::vector<RankLaunch> ranks{launch(dir, 0, {helper("child_sleep"), "60", tag}),
                                launch(dir, 1, {helper("child_sleep"), "60", tag})};
  write_file(ranks[1].log_path, "an older run\n");
  std::optional<SystemError> error;
  try {
    Supervisor sup(ranks, mode.options(), console);
  } catch (const SystemError& e) {
    error = e;
  }
  REQUIRE(error);
  CHECK(error->os_errno() == EEXIST);
  CHECK_THAT(error->what(), Contains(ranks[1].log_path));
  CHECK(read_file(ranks[1].log_path) == "an older run\n");
  CHECK(processes_with_arg(tag).empty());
  CHECK(no_children_left());
}

namespace {
// Blocks SIGUSR1 in this thread, ignores SIGPIPE and leaks a descriptor
// without O_CLOEXEC, as a host process might; undoes all three.
class MessyHost {
 public:
  MessyHost() : leaked_fd(::open("/dev/null", O_RDONLY)) {
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    ::pthread_sigmask(SIG_BLOCK, &usr1, &old_mask_);
  }
  ~MessyHost() {
    ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    ::close(leaked_fd);
  }
  const int leaked_fd;

 private:
  SignalDisposition sigpipe_{SIGPIPE, SIG_IGN};
  sigset_t old_mask_;
};
}  // namespace

TEST_CASE("ranks start clean: default signals, own process group, stdin /dev/null, no leaked fds", "[supervisor]") {
  FOR_EACH_SUPERVISION_MODE(mode, Modes::all);
  TempDir dir;
  NullLineSink console;
  std::optional<Outcome> outcome;
  {
    MessyHost host;
    REQUIRE(host.leaked_fd > 2);
    Supervisor sup({launch(dir, 0, {helper("child_signal")})}, mode.options(), console);
    outcome = run_with_deadline(sup);
  }
  const JobResult& result = outcome->result;
  REQUIRE(result.ranks.size() == 1);
  CHECK(result.success());
  const std::string report = read_file(result.ranks[0].log_path);
  INFO("child_signal says:\n" << report);
  CHECK(value_after(report, "SigBlk:", 16) == 0);
  const long long ignored = value_after(report, "SigIgn:", 16);
  CHECK((ignored & (1LL << (SIGPIPE - 1))) == 0);
  CHECK(ignored == 0);
  CHECK(value_after(report, "pid ") == result.ranks[0].pid);
  CHECK(value_after(report, "pgid ") == result.ranks[0].pid);
  CHECK_THAT(report, Contains("stdin /dev/null\n"));
  CHECK_THAT(report, Contains("fds 0 1 2\n"));
  check_nothing_left(result);
}

TEST_CASE("a rank gets exactly the environment given, and PATH from it finds the command", "[supervisor]") {
  FOR_EACH_SUPERVISION_MODE(mode, Modes::all);
  TempDir dir;
  NullLineSink console;
  const std::vector<std::string> env{"PATH=" DAVINCIRUN_HELPER_DIR, "A=1", "MULTI=line1\nline2", "EMPTY="};
  RankLaunch by_path = launch(dir, 0, {"child_env"});
  by_path.process.env = env;
  // A name with '/' is relative to the rank's work directory.
  RankLaunch relative = launch(dir, 1, {"./child_exit", "0"});
  relative.process.work_dir = DAVINCIRUN_HELPER_DIR;
  Supervisor sup({by_path, relative}, mode.options(), console);
  const auto [result, elapsed] = run_with_deadline(sup);

  REQUIRE(result.ranks.size() == 2);
  CHECK(result.success());
  std::vector<std::string> seen;
  std::istringstream entries(read_file(result.ranks[0].log_path));
  for (std::string e; std::getline(entries, e, '\0');) seen.push_back(e);
  CHECK(seen == env);
  check_nothing_left(result);
}

TEST_CASE("processes a rank leaves in its process group are killed when it exits", "[supervisor]") {
  FOR_EACH_SUPERVISION_MODE(mode, Modes::all);
  TempDir dir;
  RecordingSink console;
  const std::string tag = unique_tag("grandchild");
  Supervisor sup({launch(dir, 0, {helper("child_sleep"), "0.2", "grandchild", tag})}, mode.options(), console);
  KillOnExit cleanup;
  Joined spy([&] {  // learn the grandchild's pid early, to clean up even if run() misbehaves
    if (!console.wait_for("] ready\n", 1, 20s)) return;
    cleanup.set(static_cast<pid_t>(value_after(read_file(dir / "rank_0.log"), "grandchild ")));
  });
  const auto [result, elapsed] = run_with_deadline(sup);
  REQUIRE(result.ranks.size() == 1);
  check_status(result.ranks[0].status, Kind::exited, 0);
  CHECK(result.success());

  const auto grandchild = static_cast<pid_t>(value_after(read_file(result.ranks[0].log_path), "grandchild "));
  REQUIRE(grandchild > 0);
  CHECK(wait_gone(grandchild, 2s));
  CHECK(processes_with_arg(tag).empty());
  check_nothing_left(result);
}

// This process is no child subreaper here, so the holder is re-parented to
// init when the rank exits: out of reach even of a supervisor that owns all
// its children, which behaves like the others then. With a subreaper, the
// owning modes kill it instead (test_supervisor_modes.cpp).
TEST_CASE("a process holding a rank's output after leaving its group cannot hang run()", "[supervisor]") {
  FOR_EACH_SUPERVISION_MODE(mode, Modes::all);
  TempDir dir;
  RecordingSink console;
  const std::string tag = unique_tag("holder");
  const SupervisorOptions options = mode.options({10s, 300ms});
  Supervisor sup({launch(dir, 0, {helper("child_setsid_holder"), tag})}, options, console);
  KillOnExit cleanup;
  Joined spy([&] {
    if (!console.wait_for("] holder ", 1, 20s)) return;
    cleanup.set(static_cast<pid_t>(value_after(read_file(dir / "rank_0.log"), "holder ")));
  });
  const auto [result, elapsed] = run_with_deadline(sup);

  CHECK(elapsed < 10s);  // the holder sleeps 30 s
  REQUIRE(result.ranks.size() == 1);
  check_status(result.ranks[0].status, Kind::exited, 0);
  CHECK(result.success());
  CHECK_THAT(console.text(), Contains("still holds its output open"));
  const auto holder = static_cast<pid_t>(value_after(read_file(result.ranks[0].log_path), "holder "));
  REQUIRE(holder > 0);
  CHECK_FALSE(process_gone(holder));  // outside the rank's group: not the supervisor's to kill
  CHECK(parent_of(holder) != ::getpid());
  CHECK(result.leftover_processes_killed == 0);
  REQUIRE(::kill(holder, SIGKILL) == 0);
  CHECK(wait_gone(holder, 2s));
  CHECK(processes_with_arg(tag).empty());
  check_nothing_left(result);
}

TEST_CASE("a rank not shown live writes only to its log file, notices still reach the console", "[supervisor]") {
  FOR_EACH_SUPERVISION_MODE(mode, Modes::all);
  TempDir dir;
  RecordingSink console;
  std::vector<RankLaunch> ranks;
  // Rank 1 fails once rank 0 has had time to print and exit.
  ranks.push_back(launch(dir, 0, {helper("child_exit"), "0", "0", "line of 0"}));
  ranks.push_back(launch(dir, 1, {helper("child_exit"), "3", "300", "line of 1"}));
  ranks[1].show_on_console = false;
  Supervisor sup(ranks, mode.options(), console);
  const auto [result, elapsed] = run_with_deadline(sup);

  REQUIRE(result.ranks.size() == 2);
  const std::string text = console.text();
  INFO("console:\n" << text);
  CHECK_THAT(text, Contains("[rank 0] line of 0"));
  CHECK_THAT(text, !Contains("[rank 1]"));
  CHECK_THAT(text, Contains("rank 1 (pid"));  // the notice about its failure is not hidden
  CHECK(read_file(result.ranks[1].log_path) == "line of 1\n");
  check_nothing_left(result);
}
