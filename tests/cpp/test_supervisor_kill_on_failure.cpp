// kill_on_failure (launch mode tf-config): after a rank's failure the ranks
// left are killed at once, even those that ignore SIGTERM (TensorFlow 2.x
// takes it for a preemption notice); a stop the user asks for keeps its
// grace period.
#include <catch2/catch.hpp>

#include <signal.h>

#include "davincirun/supervisor.hpp"
#include "test_supervisor_support.hpp"

using namespace davincirun;
using namespace davincirun_test;
using Catch::Matchers::Contains;
using Kind = ExitStatus::Kind;

TEST_CASE("kill_on_failure: ranks ignoring SIGTERM are killed at once after a failure", "[supervisor]") {
  FOR_EACH_SUPERVISION_MODE(mode, Modes::all);
  TempDir dir;
  RecordingSink console;
  std::vector<RankLaunch> ranks;
  ranks.push_back(launch(dir, 0, {helper("child_sleep"), "60", "ignore-term"}));
  ranks.push_back(launch(dir, 1, {helper("child_exit"), "3", "300", "bye"}));
  SupervisorOptions options = mode.options({30s, default_drain_timeout});
  options.kill_on_failure = true;
  Supervisor sup(ranks, options, console);
  const auto [result, elapsed] = run_with_deadline(sup);

  CHECK(elapsed < 10s);  // not the 30 s grace period
  CHECK(result.stop_reason == StopReason::rank_failed);
  REQUIRE(result.first_failure == std::optional<std::size_t>(1));
  check_status(result.ranks[0].status, Kind::signaled, SIGKILL);
  CHECK(result.ranks[0].killed_by_launcher);
  CHECK_THAT(console.text(), Contains("stopping the other 1 rank(s) (SIGTERM); SIGKILL at once: TensorFlow takes "
                                      "SIGTERM for a preemption notice"));
  check_nothing_left(result);
}

TEST_CASE("kill_on_failure: a requested stop still waits the grace period", "[supervisor]") {
  FOR_EACH_SUPERVISION_MODE(mode, Modes::all);
  TempDir dir;
  RecordingSink console;
  std::vector<RankLaunch> ranks;
  for (int i = 0; i < 2; ++i) ranks.push_back(launch(dir, i, {helper("child_sleep"), "60", "ignore-term"}));
  SupervisorOptions options = mode.options({500ms, default_drain_timeout});
  options.kill_on_failure = true;
  Supervisor sup(ranks, options, console);
  Joined stopper([&] {
    if (console.wait_for("] ready\n", 2, 20s)) sup.request_stop();
  });
  const auto [result, elapsed] = run_with_deadline(sup);

  CHECK(elapsed >= 500ms);
  CHECK(result.stop_reason == StopReason::requested);
  CHECK_THAT(console.text(), Contains("grace period of 0.5 s is over"));
  for (const auto& r : result.ranks) check_status(r.status, Kind::signaled, SIGKILL);
  check_nothing_left(result);
}
