// The fallbacks for system calls that qemu-user and seccomp-filtered
// containers refuse although the kernel has them: clone(CLONE_PIDFD) and
// prctl(PR_SET_CHILD_SUBREAPER). These cases are hidden ([.refused]): ctest
// runs them under tests/seccomp/refuse_syscalls, whose seccomp filter makes
// the calls fail for real, with the errno named in
// DAVINCIRUN_TEST_REFUSED_ERRNO (tests/cpp/CMakeLists.txt). Each case first
// checks that the refusal is in force, so it fails rather than passes
// without the filter.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "davincirun/errors.hpp"
#include "davincirun/supervisor.hpp"
#include "helpers/pattern.hpp"
#include "process/descendants.hpp"
#include "test_supervisor_support.hpp"

using namespace davincirun;
using namespace davincirun_test;
using Catch::Matchers::Contains;
using Kind = ExitStatus::Kind;

namespace {

// The errno the filter answers with, from DAVINCIRUN_TEST_REFUSED_ERRNO.
struct Refusal {
  std::string name;
  int error;
};

Refusal expected_refusal() {
  const char* name = std::getenv("DAVINCIRUN_TEST_REFUSED_ERRNO");
  REQUIRE(name != nullptr);  // run through ctest, under refuse_syscalls
  const std::string n = name;
  const int error = n == "EINVAL" ? EINVAL : n == "ENOSYS" ? ENOSYS : n == "EPERM" ? EPERM : 0;
  REQUIRE(error != 0);
  return {n, error};
}

// The filter is in force: a pidfd spawn is refused with the expected errno
// and leaves no child, and this process cannot become a child subreaper.
void require_refusals(const Refusal& refusal) {
  REQUIRE(pidfd_supported());  // the kernel has pidfds; only the filter says no
  TempDir dir;
  ProcessSpec spec;
  spec.argv = {helper("child_exit"), "0"};
  spec.env = {"PATH=/usr/bin:/bin"};
  std::optional<SystemError> error;
  try {
    ChildProcess::spawn(spec, 0);
  } catch (const SystemError& e) {
    error = e;
  }
  REQUIRE(error);
  REQUIRE(error->os_errno() == refusal.error);
  REQUIRE(detail::become_child_subreaper() == refusal.error);
  REQUIRE_FALSE(detail::is_child_subreaper());
  REQUIRE(no_children_left());
}

}  // namespace

TEST_CASE("a refused pidfd spawn fails clearly, or starts the child without a pidfd when allowed",
          "[.refused][process]") {
  const Refusal refusal = expected_refusal();
  require_refusals(refusal);
  ProcessSpec spec;
  spec.argv = {helper("child_exit"), "7"};
  spec.env = {"PATH=/usr/bin:/bin"};

  SECTION("not allowed: SystemError naming the flag and the way out, nothing started") {
    try {
      ChildProcess::spawn(spec, 0);
      FAIL("spawn succeeded");
    } catch (const SystemError& e) {
      CHECK(e.os_errno() == refusal.error);
      CHECK_THAT(e.what(), Contains("CLONE_PIDFD") && Contains("seccomp") && Contains("'sigchld'"));
    }
    CHECK(no_children_left());
  }
  SECTION("allowed: the same child, without a pidfd, reaped by pid") {
    spec.pidfd_optional = true;
    ChildProcess child = ChildProcess::spawn(spec, 0);
    CHECK(child.pidfd() == -1);
    CHECK(child.pidfd_refusal() == refusal.error);
    const ExitStatus status = child.reap();
    check_status(status, Kind::exited, 7);
    CHECK(no_children_left());
  }
}

TEST_CASE("an automatic supervisor owning all children falls back to SIGCHLD: fail-fast, complete logs",
          "[.refused][supervisor]") {
  const Refusal refusal = expected_refusal();
  require_refusals(refusal);
  TempDir dir;
  RecordingSink console;
  constexpr std::size_t bytes = 3 * 1024 * 1024;
  const std::string tag = unique_tag("refused-fallback");
  SupervisorOptions options{10s, default_drain_timeout};
  options.owns_all_children = true;  // tracking: automatic
  Supervisor sup({launch(dir, 0, {helper("child_sleep"), "60", tag}), launch(dir, 1, {helper("child_write"), "0"}),
                  launch(dir, 2, {helper("child_write"), std::to_string(bytes), std::to_string(SIGSEGV)})},
                 options, console);
  CHECK(sup.tracking() == ProcessTracking::sigchld);
  const auto [result, elapsed] = run_with_deadline(sup);

  CHECK(elapsed < options.grace_period);  // SIGTERM stopped the sleeper at once
  CHECK(result.tracking == ProcessTracking::sigchld);
  REQUIRE(result.tracking_fallback);
  CHECK_THAT(*result.tracking_fallback, Contains("CLONE_PIDFD") && Contains(refusal.name));
  CHECK_FALSE(result.child_subreaper);
  CHECK(result.stop_reason == StopReason::rank_failed);
  REQUIRE(result.first_failure == std::optional<std::size_t>(2));
  CHECK(result.exit_code() == 128 + SIGSEGV);
  check_status(result.ranks[2].status, Kind::signaled, SIGSEGV);
  CHECK(read_file(result.ranks[2].log_path) == pattern_bytes(bytes));  // every byte before the crash
  check_status(result.ranks[1].status, Kind::exited, 0);
  check_status(result.ranks[0].status, Kind::signaled, SIGTERM);
  CHECK(result.ranks[0].terminated_by_launcher);
  CHECK(read_file(result.ranks[0].log_path) == "ready\n");
  // The fallback is recorded in the result, not announced: nothing is lost by it.
  CHECK_THAT(console.text(), !Contains("CLONE_PIDFD"));
  CHECK(processes_with_arg(tag).empty());
  check_nothing_left(result);
}

TEST_CASE("pidfd tracking that cannot fall back reports the refusal before any rank runs", "[.refused][supervisor]") {
  const Refusal refusal = expected_refusal();
  require_refusals(refusal);
  TempDir dir;
  NullLineSink console;
  const std::string tag = unique_tag("refused-no-fallback");
  SupervisorOptions options;
  const bool owning = GENERATE(false, true);
  options.owns_all_children = owning;
  // Forced pidfd, or automatic in a process that does not own its children.
  options.tracking = owning ? ProcessTracking::pidfd : ProcessTracking::automatic;
  INFO("owns_all_children: " << owning);
  try {
    Supervisor sup({launch(dir, 0, {helper("child_sleep"), "60", tag})}, options, console);
    FAIL("the supervisor started");
  } catch (const SystemError& e) {
    CHECK(e.os_errno() == refusal.error);
    CHECK_THAT(e.what(), Contains("CLONE_PIDFD"));
  }
  CHECK(::access((dir / "rank_0.log").c_str(), F_OK) != 0);
  CHECK(processes_with_arg(tag).empty());
  CHECK(no_children_left());
}

// child_setsid_holder's grandchild leaves the rank's group with setsid() and
// holds its stdout 30 s. This process is no subreaper (the filter refuses
// it), so the holder goes to init when the rank exits: only the job's tag in
// its environment can find it.
TEST_CASE("without the subreaper flag, what a rank detached is swept by the job's tag, and only by it",
          "[.refused][supervisor]") {
  const Refusal refusal = expected_refusal();
  require_refusals(refusal);
  const bool tagged = GENERATE(true, false);
  INFO("job_tag set: " << tagged);
  TempDir dir;
  RecordingSink console;
  const std::string tag = unique_tag("refused-sweep");
  const std::string entry = "DAVINCIRUN_JOB_TAG=" + tag;
  SupervisorOptions options{10s, tagged ? 3s : 300ms};  // tagged: only the sweep can end the run in time
  options.owns_all_children = true;
  if (tagged) options.job_tag = entry;
  RankLaunch rank = launch(dir, 0, {helper("child_setsid_holder"), tag});
  rank.process.env.push_back(entry);
  Supervisor sup({rank}, options, console);
  KillOnExit cleanup;
  std::optional<Outcome> outcome;
  {
    Joined spy([&] {
      if (!console.wait_for("] holder ", 1, 5s)) return;
      cleanup.set(static_cast<pid_t>(value_after(read_file(dir / "rank_0.log"), "holder ")));
    });
    outcome = run_with_deadline(sup, 5s);
  }
  const auto& [result, elapsed] = *outcome;
  const auto holder = static_cast<pid_t>(value_after(read_file(result.ranks[0].log_path), "holder "));
  REQUIRE(holder > 0);
  const std::string text = console.text();
  INFO("console:\n" << text);
  CHECK(result.success());
  CHECK_FALSE(result.child_subreaper);
  CHECK(parent_of(holder) != ::getpid());  // re-parented past this process, or already gone
  CHECK(elapsed < 2s);
  if (tagged) {
    CHECK(result.leftover_processes_killed == 1);
    CHECK(wait_gone(holder, 2s));
    CHECK_THAT(text, Contains("killed 1 process(es) the ranks left running"));
    CHECK_THAT(text, !Contains("still holds its output open"));
  } else {
    CHECK(result.leftover_processes_killed == 0);
    CHECK_THAT(text, Contains("still holds its output open"));
    CHECK_FALSE(process_gone(holder));  // the loss the subreaper flag prevents
    REQUIRE(::kill(holder, SIGKILL) == 0);
    CHECK(wait_gone(holder, 2s));
  }
  CHECK(processes_with_arg(tag).empty());
  check_nothing_left(result);
}
