// A job that restarts (restart_policy.hpp, SupervisorOptions::max_restarts):
// the rule that judges each attempt, the test for a failure that repeats,
// and a Supervisor that starts every rank again and keeps every attempt.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "davincirun/restart_policy.hpp"
#include "davincirun/supervisor.hpp"
#include "test_supervisor_support.hpp"

using namespace davincirun;
using namespace davincirun_test;
using Catch::Matchers::Contains;

namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// An attempt `n` whose rank `rank` failed with `code`, its log holding `log`.
JobAttempt failed_attempt(const TempDir& dir, int n, int rank, int code, const std::string& log) {
  JobAttempt a;
  a.attempt = n;
  a.stop_reason = StopReason::rank_failed;
  RankResult r;
  r.rank = rank;
  r.status = ExitStatus{ExitStatus::Kind::exited, code};
  r.log_path = dir / ("rank_" + std::to_string(rank) + ".attempt" + std::to_string(n) + ".log");
  write(r.log_path, log);
  a.first_failure = r;
  a.ranks.push_back(r);
  return a;
}

// The result an attempt ends with: the earlier attempts (their root causes as the judge gave them), then it.
JobResult result_of(std::vector<JobAttempt> attempts) {
  JobResult result;
  result.stop_reason = attempts.back().stop_reason;
  if (attempts.back().first_failure) {
    result.ranks.push_back(*attempts.back().first_failure);
    result.first_failure = 0;
  }
  result.attempts = std::move(attempts);
  return result;
}

SupervisorOptions restarts(int max, bool same_error = false) {
  SupervisorOptions o;
  o.max_restarts = max;
  o.restart_on_same_error = same_error;
  return o;
}

const std::string traceback =
    "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\nValueError: bad input\n";

}  // namespace

TEST_CASE("a line is new unless the earlier log holds it, times, decimals and addresses aside", "[restart]") {
  TempDir dir;
  const std::string before = dir / "before.log", now = dir / "now.log";
  write(before, "[W 2026-12-04 17:53:41.123] start at 0x7f3a12\nepoch 1 loss 0.7012\nepoch 2 loss 0.6012\n");
  SECTION("the same lines, other times, losses and addresses") {
    write(now, "[W 2026-12-05 09:01:02.999] start at 0xdeadbeef\nepoch 2 loss 0.5999\n");
    CHECK(wrote_nothing_new(before, now));
  }
  SECTION("a later epoch is new") {
    write(now, "epoch 2 loss 0.6012\nepoch 3 loss 0.5000\n");
    CHECK_FALSE(wrote_nothing_new(before, now));
  }
  SECTION("lines redrawn with a carriage return count one by one") {
    write(now, "epoch 1 loss 0.1\repoch 2 loss 0.2\r\n");
    CHECK(wrote_nothing_new(before, now));
  }
  SECTION("an empty log writes nothing new") {
    write(now, "");
    CHECK(wrote_nothing_new(before, now));
  }
  SECTION("a log that cannot be read counts as new: the job restarts") {
    CHECK_FALSE(wrote_nothing_new(before, dir / "missing.log"));
    CHECK_FALSE(wrote_nothing_new(dir / "missing.log", before));
  }
}

TEST_CASE("the restart rule: a failure restarts while restarts are left, unless it repeats or a stop rules it out",
          "[restart]") {
  TempDir dir;
  SECTION("a job that succeeded is never restarted, and nothing is said") {
    JobAttempt ok;
    const AttemptVerdict v = judge_attempt(result_of({ok}), "", restarts(3));
    CHECK_FALSE(v.restart);
    CHECK(v.decision.empty());
  }
  SECTION("a first failure restarts, its root cause read from the log") {
    const AttemptVerdict v = judge_attempt(result_of({failed_attempt(dir, 1, 2, 1, traceback)}), "", restarts(3));
    CHECK(v.restart);
    CHECK(v.root_cause == "ValueError: bad input");
    CHECK(v.decision == "restarted (1 of 3 restarts)");
  }
  SECTION("an event that rules a restart out wins") {
    const AttemptVerdict v =
        judge_attempt(result_of({failed_attempt(dir, 1, 2, 1, traceback)}), "stop requested", restarts(3));
    CHECK_FALSE(v.restart);
    CHECK(v.decision == "not restarted: stop requested");
  }
  SECTION("the last allowed attempt is not restarted") {
    JobAttempt first = failed_attempt(dir, 1, 2, 1, "epoch 1\n" + traceback);
    first.root_cause = "ValueError: bad input";
    const AttemptVerdict v =
        judge_attempt(result_of({first, failed_attempt(dir, 2, 2, 1, "epoch 2\n" + traceback)}), "", restarts(1));
    CHECK_FALSE(v.restart);
    CHECK(v.decision == "not restarted: no restarts left (max_restarts 1)");
  }
  SECTION("the same failure with nothing new written stops early, unless asked to restart all the same") {
    JobAttempt first = failed_attempt(dir, 1, 2, 1, "loading 0.5 s\n" + traceback);
    first.root_cause = "ValueError: bad input";
    const JobResult again = result_of({first, failed_attempt(dir, 2, 2, 1, "loading 0.7 s\n" + traceback)});
    const AttemptVerdict v = judge_attempt(again, "", restarts(5));
    CHECK_FALSE(v.restart);
    CHECK_THAT(v.decision, Contains("it failed as attempt 1 did (rank 2 with exit code 1, ValueError: bad input)"));
    CHECK_THAT(v.decision, Contains("restart_on_same_error"));
    CHECK(judge_attempt(again, "", restarts(5, true)).restart);
  }
  SECTION("the same error after new output is progress: it restarts") {
    JobAttempt first = failed_attempt(dir, 1, 2, 1, "epoch 1\n" + traceback);
    first.root_cause = "ValueError: bad input";
    CHECK(judge_attempt(result_of({first, failed_attempt(dir, 2, 2, 1, "epoch 2\n" + traceback)}), "", restarts(5))
              .restart);
  }
  SECTION("another exit status, another error or another rank's own lines are another failure") {
    JobAttempt first = failed_attempt(dir, 1, 2, 1, traceback);
    first.root_cause = "ValueError: bad input";
    CHECK(judge_attempt(result_of({first, failed_attempt(dir, 2, 2, 7, traceback)}), "", restarts(5)).restart);
    CHECK(judge_attempt(result_of({first, failed_attempt(dir, 2, 2, 1, "KeyError: 'lr'\n")}), "", restarts(5)).restart);
    CHECK(judge_attempt(result_of({first, failed_attempt(dir, 2, 3, 1, "rank 3 up\n" + traceback)}), "", restarts(5))
              .restart);
  }
  SECTION("every rank failing alike: another rank first this time is the same failure") {
    // Rank 2 failed first in attempt 1 and rank 3 was stopped by us; now rank 3 is first.
    JobAttempt first = failed_attempt(dir, 1, 2, 1, traceback);
    RankResult stopped;
    stopped.rank = 3;
    stopped.status = ExitStatus{ExitStatus::Kind::signaled, 15};
    stopped.terminated_by_launcher = true;
    first.ranks.push_back(stopped);
    const AttemptVerdict v =
        judge_attempt(result_of({first, failed_attempt(dir, 2, 3, 1, traceback)}), "", restarts(5));
    CHECK_FALSE(v.restart);
    CHECK_THAT(v.decision, Contains("it failed as attempt 1 did (rank 3 with exit code 1"));
  }
}

TEST_CASE("a Supervisor that restarts starts every rank again and keeps every attempt", "[restart][supervisor]") {
  FOR_EACH_SUPERVISION_MODE(mode, Modes::owning);
  TempDir dir;
  // Attempt 1: rank 1 fails at once, rank 0 waits to be stopped. Later: both exit 0.
  std::vector<RankLaunch> first = {launch(dir, 0, {"/bin/sleep", "30"}),
                                   launch(dir, 1, {"/bin/sh", "-c", "echo 'ValueError: flaky'; exit 3"})};
  SupervisorOptions options = mode.options();
  options.max_restarts = 2;
  options.restart_delay = std::chrono::milliseconds(100);
  NullLineSink console;
  Supervisor sup(std::move(first), options, console);
  std::vector<int> asked;
  std::vector<std::string> journal;
  Restarts r;
  r.judge = [&](const JobResult& attempt, const std::string& ruled_out_by) {
    return judge_attempt(attempt, ruled_out_by, options);
  };
  r.launches = [&](int attempt) {
    asked.push_back(attempt);
    std::vector<RankLaunch> next;
    for (int rank = 0; rank < 2; ++rank) {
      RankLaunch l = launch(dir, rank, {"/bin/sh", "-c", "echo attempt " + std::to_string(attempt)});
      l.log_path = dir / ("rank_" + std::to_string(rank) + ".attempt" + std::to_string(attempt) + ".log");
      next.push_back(std::move(l));
    }
    return next;
  };
  sup.set_restarts(std::move(r));
  sup.set_journal([&](const std::string& line) { journal.push_back(line); });
  const Outcome out = run_with_deadline(sup);
  CHECK(out.result.success());
  CHECK(asked == std::vector<int>{2});
  REQUIRE(out.result.attempts.size() == 2);
  const JobAttempt& a1 = out.result.attempts[0];
  CHECK(a1.attempt == 1);
  CHECK(a1.restarted);
  CHECK(a1.stop_reason == StopReason::rank_failed);
  REQUIRE(a1.first_failure);
  CHECK(a1.first_failure->rank == 1);
  CHECK(a1.decision == "restarted (1 of 2 restarts)");
  CHECK(out.result.attempts[1].attempt == 2);
  CHECK(out.result.attempts[1].started >= a1.ended + std::chrono::milliseconds(90));
  CHECK(read_file(dir / "rank_1.attempt2.log") == "attempt 2\n");
  CHECK(read_file(dir / "rank_1.log") == "ValueError: flaky\n");  // the first attempt's log is kept
  CHECK(std::find(journal.begin(), journal.end(), "restarting -> starting on delay_over") != journal.end());
  check_nothing_left(out.result);
}

TEST_CASE("a stop while a Supervisor waits to restart calls the restart off and names the job's end",
          "[restart][supervisor]") {
  TempDir dir;
  SupervisorOptions options = supervision_modes(Modes::owning).front().options();
  options.max_restarts = 3;
  options.restart_delay = std::chrono::milliseconds(20'000);
  NullLineSink console;
  Supervisor sup({launch(dir, 0, {"/bin/sh", "-c", "exit 5"})}, options, console);
  Restarts r;
  r.judge = [&](const JobResult& attempt, const std::string& why) { return judge_attempt(attempt, why, options); };
  r.launches = [](int) -> std::vector<RankLaunch> { throw std::logic_error("no second attempt expected"); };
  sup.set_restarts(std::move(r));
  std::thread stopper([&sup] {
    while (sup.state() != JobState::restarting) std::this_thread::sleep_for(5ms);
    sup.request_stop();
  });
  const Outcome out = run_with_deadline(sup);
  stopper.join();
  CHECK(out.elapsed < 5s);
  CHECK(out.result.stop_reason == StopReason::requested);
  CHECK(out.result.stopped_in == JobState::restarting);
  CHECK(out.result.exit_code() == 130);
  CHECK(out.result.ranks.at(0).status.value == 5);  // the last attempt's ranks
  REQUIRE(out.result.attempts.size() == 1);
  CHECK_FALSE(out.result.attempts[0].restarted);
  CHECK(out.result.attempts[0].stop_reason == StopReason::rank_failed);
  CHECK(out.result.attempts[0].decision == "not restarted: the restart was called off: stop requested");
  check_nothing_left(out.result);
}
