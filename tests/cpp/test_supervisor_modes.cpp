// What differs between the supervision modes: a supervisor that owns every
// child of its process (as in davincirun-supervisor, a child subreaper with
// SIGCHLD blocked) reaps orphans re-parented to it during the run and kills
// whatever the ranks left running once they all exited; one that does not
// touches only the ranks. Also the options it refuses, and the /proc walk
// (detail/descendants.hpp) behind the final sweep.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <set>

#include "davincirun/errors.hpp"
#include "davincirun/supervisor.hpp"
#include "process/descendants.hpp"
#include "test_supervisor_support.hpp"

using namespace davincirun;
using namespace davincirun_test;
using Catch::Matchers::Contains;
using Kind = ExitStatus::Kind;

namespace {

// Unblocks SIGCHLD in this thread for its lifetime (main() blocks it), then
// restores the mask.
class SigchldUnblocked {
 public:
  SigchldUnblocked() {
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    ::pthread_sigmask(SIG_UNBLOCK, &chld, &old_);
  }
  ~SigchldUnblocked() { ::pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  SigchldUnblocked(const SigchldUnblocked&) = delete;
  SigchldUnblocked& operator=(const SigchldUnblocked&) = delete;

 private:
  sigset_t old_;
};

bool sigchld_blocked_here() {
  sigset_t mask;
  ::pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return sigismember(&mask, SIGCHLD) == 1;
}

// Starts a helper program as a direct child of this process (posix_spawn,
// empty signal mask), with stdout and stderr appended to `out_path`.
pid_t start_helper(const std::vector<std::string>& argv, const std::string& out_path) {
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&files, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  char* no_env[] = {nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0].c_str(), &files, &attr, args.data(), no_env);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&files);
  REQUIRE(rc == 0);
  return pid;
}

// Waits until `path` holds `needle`; false on timeout.
bool wait_for_text(const std::string& path, const std::string& needle, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (read_file(path).find(needle) == std::string::npos) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// SIGKILLs every pid given when the test ends, and reaps those that are
// (or became, through a subreaper) children of this process.
class KillAllOnExit {
 public:
  void add(pid_t pid) {
    if (pid > 0) pids_.push_back(pid);
  }
  /// Drops the pids already reaped (their numbers may be reused).
  void forget_reaped() {
    pids_.erase(std::remove_if(pids_.begin(), pids_.end(), [](pid_t pid) { return reaped(pid); }), pids_.end());
  }
  ~KillAllOnExit() {
    for (pid_t pid : pids_) ::kill(pid, SIGKILL);
    for (pid_t pid : pids_) {
      int status;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    }
  }

 private:
  std::vector<pid_t> pids_;
};

std::set<pid_t> as_set(const std::vector<pid_t>& pids) { return {pids.begin(), pids.end()}; }

}  // namespace

TEST_CASE("SIGCHLD is blocked in every test thread, as owns_all_children needs", "[supervisor][modes]") {
  CHECK(sigchld_blocked_here());
  bool in_thread = false;
  {
    Joined thread([&] { in_thread = sigchld_blocked_here(); });
  }
  CHECK(in_thread);
}

TEST_CASE("process tracking 'sigchld' is refused without owns_all_children", "[supervisor][modes]") {
  TempDir dir;
  NullLineSink console;
  const std::string tag = unique_tag("sigchld-not-owning");
  SupervisorOptions options;
  options.tracking = ProcessTracking::sigchld;
  options.owns_all_children = false;
  std::optional<ConfigError> error;
  try {
    Supervisor sup({launch(dir, 0, {helper("child_sleep"), "60", tag})}, options, console);
  } catch (const ConfigError& e) {
    error = e;
  }
  REQUIRE(error);
  CHECK_THAT(error->what(), Contains("sigchld") && Contains("owns_all_children"));
  CHECK(processes_with_arg(tag).empty());
  CHECK(::access((dir / "rank_0.log").c_str(), F_OK) != 0);
  CHECK(no_children_left());
}

TEST_CASE("owns_all_children is refused while SIGCHLD is not blocked in the calling thread", "[supervisor][modes]") {
  FOR_EACH_SUPERVISION_MODE(mode, Modes::owning);
  TempDir dir;
  NullLineSink console;
  const std::string tag = unique_tag("sigchld-unblocked");
  std::optional<ConfigError> error;
  {
    SigchldUnblocked unblocked;
    REQUIRE_FALSE(sigchld_blocked_here());
    try {
      Supervisor sup({launch(dir, 0, {helper("child_sleep"), "60", tag})}, mode.options(), console);
    } catch (const ConfigError& e) {
      error = e;
    }
  }
  CHECK(sigchld_blocked_here());  // restored for the tests that follow
  REQUIRE(error);
  CHECK_THAT(error->what(), Contains("SIGCHLD blocked"));
  CHECK(::access((dir / "rank_0.log").c_str(), F_OK) != 0);
  CHECK(processes_with_arg(tag).empty());
  CHECK(no_children_left());
}

TEST_CASE("automatic tracking picks pidfd where the kernel has it, sigchld otherwise when owning",
          "[supervisor][modes]") {
  TempDir dir;
  NullLineSink console;
  const bool owning = GENERATE(false, true);
  INFO("owns_all_children: " << owning);
  SupervisorOptions options;
  options.tracking = ProcessTracking::automatic;
  options.owns_all_children = owning;
  if (!pidfd_supported() && !owning) {
    CHECK_THROWS_AS(Supervisor({launch(dir, 0, {helper("child_exit"), "0"})}, options, console), ConfigError);
    return;
  }
  Supervisor sup({launch(dir, 0, {helper("child_exit"), "0"})}, options, console);
  const ProcessTracking expected = pidfd_supported() ? ProcessTracking::pidfd : ProcessTracking::sigchld;
  CHECK(sup.tracking() == expected);
  const auto [result, elapsed] = run_with_deadline(sup);
  CHECK(result.tracking == expected);
  CHECK(result.success());
  check_nothing_left(result);
}

// The holder is child_setsid_holder's grandchild: it left the rank's process
// group with setsid() and sleeps 30 s holding the rank's output open. This
// process is a child subreaper here, so the holder comes back to it when the
// rank exits; only a supervisor that owns all children may kill it.
TEST_CASE("a setsid() process a rank left running is swept only by a supervisor owning all children",
          "[supervisor][modes]") {
  FOR_EACH_SUPERVISION_MODE(mode, Modes::all);
  ChildSubreaper subreaper;
  TempDir dir;
  RecordingSink console;
  const std::string tag = unique_tag("swept");
  // Owning: a drain timeout beyond the test's deadline, so only the sweep can
  // end the run in time. Not owning: the drain timeout abandons the pipe.
  const SupervisorOptions options = mode.options({10s, mode.owns_all_children ? 3s : 300ms});
  Supervisor sup({launch(dir, 0, {helper("child_setsid_holder"), tag})}, options, console);
  KillAndReapOnExit cleanup;
  std::optional<Outcome> outcome;
  {
    Joined spy([&] {  // learn the holder's pid early, to clean up even if run() misbehaves
      if (!console.wait_for("] holder ", 1, 5s)) return;
      cleanup.set(static_cast<pid_t>(value_after(read_file(dir / "rank_0.log"), "holder ")));
    });
    outcome = run_with_deadline(sup, 5s);
  }
  const auto& [result, elapsed] = *outcome;

  REQUIRE(result.ranks.size() == 1);
  check_status(result.ranks[0].status, Kind::exited, 0);
  CHECK(result.success());
  const auto holder = static_cast<pid_t>(value_after(read_file(result.ranks[0].log_path), "holder "));
  REQUIRE(holder > 0);
  const std::string text = console.text();
  INFO("console:\n" << text);
  if (mode.owns_all_children) {
    CHECK(elapsed < 2s);
    CHECK(result.leftover_processes_killed == 1);  // the holder, and nothing else
    CHECK(reaped(holder));                         // killed, and reaped by the supervisor: not even a zombie is left
    CHECK_THAT(text, Contains("[davincirun] killed 1 process(es) the ranks left running"));
    CHECK_THAT(text, !Contains("still holds its output open"));
  } else {
    CHECK(elapsed < 2s);
    CHECK(result.leftover_processes_killed == 0);
    CHECK_THAT(text, Contains("still holds its output open"));
    CHECK_THAT(text, !Contains("process(es) the ranks left running"));
    CHECK_FALSE(process_gone(holder));  // re-parented to this process, yet not the supervisor's to kill
    CHECK(parent_of(holder) == ::getpid());
    REQUIRE(::kill(holder, SIGKILL) == 0);
    int status = 0;
    CHECK(::waitpid(holder, &status, 0) == holder);  // ours to reap, as the subreaper
    CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
    CHECK(reaped(holder));
  }
  if (reaped(holder)) cleanup.clear();
  CHECK(processes_with_arg(tag).empty());
  check_nothing_left(result);
}

// The exits happen before run() starts, so its first wakeup sees all of
// them at once, SIGCHLD (from rank 0) among them: rank 2 dies first, then
// rank 1, which was started earlier and so comes first in waitid(P_ALL).
// With pidfds the order of the exits decides; SIGCHLD alone cannot tell it.
TEST_CASE("with pidfds the first failure is the rank that died first, whatever order the ranks started in",
          "[supervisor][modes]") {
  FOR_EACH_SUPERVISION_MODE(mode, Modes::all);
  if (mode.tracking != ProcessTracking::pidfd) return;
  TempDir dir;
  NullLineSink console;
  const std::string tag = unique_tag("first-death");
  Supervisor sup({launch(dir, 0, {helper("child_exit"), "0"}), launch(dir, 1, {helper("child_sleep"), "60", tag}),
                  launch(dir, 2, {helper("child_sleep"), "60", tag})},
                 mode.options(), console);
  const std::vector<pid_t> pids = sup.pids();
  REQUIRE(wait_gone(pids[0], 5s));
  REQUIRE(::kill(pids[2], SIGKILL) == 0);
  REQUIRE(wait_gone(pids[2], 5s));
  REQUIRE(::kill(pids[1], SIGTERM) == 0);
  REQUIRE(wait_gone(pids[1], 5s));
  const auto [result, elapsed] = run_with_deadline(sup, 10s);

  REQUIRE(result.first_failure.has_value());
  CHECK(*result.first_failure == 2);
  CHECK(result.exit_code() == 128 + SIGKILL);
  check_status(result.ranks[2].status, Kind::signaled, SIGKILL);
  CHECK_FALSE(result.ranks[2].terminated_by_launcher);
  check_status(result.ranks[1].status, Kind::signaled, SIGTERM);
  check_status(result.ranks[0].status, Kind::exited, 0);
  CHECK(processes_with_arg(tag).empty());
  check_nothing_left(result);
}

// A process in the rank's own group dies with it (SIGKILL to the group), but
// it may still be dying, already re-parented to this subreaper, when the
// sweep runs: it must not be counted as something the ranks left running.
TEST_CASE("members of a rank's own process group are never counted as leftovers", "[supervisor][modes]") {
  FOR_EACH_SUPERVISION_MODE(mode, Modes::owning);
  ChildSubreaper subreaper;
  for (int attempt = 0; attempt < 10; ++attempt) {
    TempDir dir;
    RecordingSink console;
    Supervisor sup({launch(dir, 0, {helper("child_sleep"), "0.02", "grandchild", unique_tag("group")})}, mode.options(),
                   console);
    const auto [result, elapsed] = run_with_deadline(sup, 10s);
    INFO("attempt " << attempt << ", console:\n" << console.text());
    REQUIRE(result.ranks.size() == 1);
    CHECK(result.success());
    CHECK(result.leftover_processes_killed == 0);
    CHECK_THAT(console.text(), !Contains("process(es) the ranks left running"));
    check_nothing_left(result);
  }
}

// The orphan is child_orphan's grandchild, in a session of its own (so the
// kill of the rank's process group when it exits misses it): the rank exits at
// once, the orphan (re-parented to this subreaper process) exits 300 ms later
// while rank 1 still runs; then the test stops the job.
TEST_CASE("an orphan re-parented to this process is reaped during the run only by a supervisor owning all children",
          "[supervisor][modes]") {
  FOR_EACH_SUPERVISION_MODE(mode, Modes::all);
  ChildSubreaper subreaper;
  TempDir dir;
  RecordingSink console;
  const std::string tag = unique_tag("orphan");
  Supervisor sup(
      {launch(dir, 0, {helper("child_orphan"), "300", tag}), launch(dir, 1, {helper("child_sleep"), "60", tag})},
      mode.options({10s, default_drain_timeout}), console);
  KillAndReapOnExit cleanup;
  pid_t orphan = -1;
  bool reparented = false;  // it became this process's child while it slept
  bool reaped_in_run = false;
  bool zombie_in_run = false;
  std::optional<Outcome> outcome;
  {
    Joined spy([&] {
      if (!console.wait_for("] orphan ", 1, 5s) || !console.wait_for("] ready\n", 1, 5s)) return;
      orphan = static_cast<pid_t>(value_after(read_file(dir / "rank_0.log"), "orphan "));
      if (orphan <= 0) return;
      cleanup.set(orphan);
      const auto deadline = std::chrono::steady_clock::now() + 2s;
      while (!reparented && !process_gone(orphan) && std::chrono::steady_clock::now() < deadline) {
        reparented = parent_of(orphan) == ::getpid();
        std::this_thread::sleep_for(2ms);
      }
      if (mode.owns_all_children) {
        reaped_in_run = wait_reaped(orphan, 2s);
      } else if (wait_gone(orphan, 2s)) {
        // A zombie, and it stays one: the supervisor leaves it to this host.
        std::this_thread::sleep_for(100ms);
        zombie_in_run = process_state(orphan) == 'Z';
      }
      sup.request_stop();  // rank 1 was still running all along
    });
    outcome = run_with_deadline(sup, 5s);
  }
  const JobResult& result = outcome->result;
  REQUIRE(result.ranks.size() == 2);
  check_status(result.ranks[0].status, Kind::exited, 0);
  check_status(result.ranks[1].status, Kind::signaled, SIGTERM);
  CHECK(result.ranks[1].terminated_by_launcher);
  CHECK(result.stop_reason == StopReason::requested);
  CHECK(result.leftover_processes_killed == 0);  // it had ended on its own
  REQUIRE(orphan > 0);
  CHECK(reparented);
  if (mode.owns_all_children) {
    CHECK(reaped_in_run);
    CHECK(reaped(orphan));
  } else {
    CHECK(zombie_in_run);
    CHECK(process_state(orphan) == 'Z');
    CHECK(parent_of(orphan) == ::getpid());
    int status = 0;
    CHECK(::waitpid(orphan, &status, 0) == orphan);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  if (reaped(orphan)) cleanup.clear();
  check_nothing_left(result);
}

TEST_CASE("live_descendants and kill_all_descendants find and end a tree of processes below this one",
          "[descendants]") {
  ChildSubreaper subreaper;  // so that the setsid() holder comes back to this process
  TempDir dir;
  KillAllOnExit cleanup;
  const std::string tag = unique_tag("tree");
  // a: child_sleep with a grandchild b in its group; c: a plain sleeper;
  // d: child_setsid_holder, which exits and leaves its setsid() child e.
  const pid_t a = start_helper({helper("child_sleep"), "60", "grandchild", tag}, dir / "a.out");
  cleanup.add(a);
  const pid_t c = start_helper({helper("child_sleep"), "60", tag}, dir / "c.out");
  cleanup.add(c);
  const pid_t d = start_helper({helper("child_setsid_holder"), tag}, dir / "d.out");
  cleanup.add(d);
  REQUIRE(wait_for_text(dir / "a.out", "ready\n", 5s));
  REQUIRE(wait_for_text(dir / "c.out", "ready\n", 5s));
  REQUIRE(wait_for_text(dir / "d.out", "holder ", 5s));
  const auto b = static_cast<pid_t>(value_after(read_file(dir / "a.out"), "grandchild "));
  const auto e = static_cast<pid_t>(value_after(read_file(dir / "d.out"), "holder "));
  REQUIRE(b > 0);
  REQUIRE(e > 0);
  cleanup.add(b);
  cleanup.add(e);
  int status = 0;
  REQUIRE(::waitpid(d, &status, 0) == d);  // d exited 0 once e had left its group
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  REQUIRE(parent_of(e) == ::getpid());  // re-parented to this subreaper

  CHECK(as_set(detail::live_descendants(::getpid())) == std::set<pid_t>{a, b, c, e});
  CHECK(as_set(detail::live_descendants(a)) == std::set<pid_t>{b});
  CHECK(detail::live_descendants(c).empty());
  CHECK(detail::live_descendants(d).empty());  // reaped: no such process

  // A zombie is no live descendant; kill_all_descendants reaps it, uncounted.
  REQUIRE(::kill(c, SIGKILL) == 0);
  const auto deadline = std::chrono::steady_clock::now() + 2s;
  while (process_state(c) != 'Z' && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(2ms);
  REQUIRE(process_state(c) == 'Z');
  CHECK(as_set(detail::live_descendants(::getpid())) == std::set<pid_t>{a, b, e});

  const auto start = std::chrono::steady_clock::now();
  const std::size_t killed = detail::kill_all_descendants(2s);
  CHECK(std::chrono::steady_clock::now() - start < 1s);
  CHECK(killed == 3);  // a, b, e
  CHECK(detail::live_descendants(::getpid()).empty());
  CHECK(reaped(c));  // the zombie: reaped by the first pass
  for (pid_t pid : {a, b, e}) {
    INFO("pid " << pid);
    CHECK(process_gone(pid));
  }
  // Each of them is (or was) a child of this process: a and e directly, b
  // once a died. kill_all_descendants() may return while one is still an
  // unreaped zombie (it can turn into one between the pass's reaping and its
  // /proc scan), so reap once more before requiring that nothing is left.
  detail::reap_zombie_children();
  for (pid_t pid : {a, b, e}) {
    INFO("pid " << pid);
    CHECK(wait_reaped(pid, 2s));
  }
  cleanup.forget_reaped();
  CHECK(processes_with_arg(tag).empty());
  CHECK(no_children_left());
  CHECK(detail::kill_all_descendants(1s) == 0);  // nothing left: returns at once
}
