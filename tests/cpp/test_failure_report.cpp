// failure_report(): what people read when a job fails (the CLI's stderr, the
// Python exception's message).
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <string>

#include "davincirun/failure_report.hpp"
#include "test_support.hpp"

using namespace davincirun;
using namespace davincirun_test;

namespace {

// `n` ranks; rank `failed` exited 3 after writing a progress bar and an
// error to its log; the others were stopped by SIGTERM, except `killed`.
JobResult failed_job(const TempDir& dir, int n, int failed, int killed = -1) {
  JobResult result;
  for (int i = 0; i < n; ++i) {
    RankResult r;
    r.rank = i;
    r.pid = 1000 + i;
    r.log_path = dir / ("rank_" + std::to_string(i) + ".log");
    if (i == failed) {
      write_file(r.log_path, "step 1\r\nloading\r10%\r50%\r90%\nTraceback: boom\n");
      r.status = ExitStatus{ExitStatus::Kind::exited, 3};
    } else {
      r.status = ExitStatus{ExitStatus::Kind::signaled, i == killed ? SIGKILL : SIGTERM};
      r.terminated_by_launcher = true;
      r.killed_by_launcher = i == killed;
    }
    result.ranks.push_back(r);
  }
  result.first_failure = static_cast<std::size_t>(failed);
  result.stop_reason = StopReason::rank_failed;
  return result;
}

}  // namespace

TEST_CASE("a failure report names the failed rank, its log's end as shown, then the others", "[failure_report]") {
  TempDir dir;
  const std::string report = failure_report(failed_job(dir, 4, 1));
  CHECK(report ==
        "rank 1 (pid 1001) failed with exit code 3 after 0.0 s\n"
        "log: " +
            dir / "rank_1.log" +
            "\n"
            "last lines of its log:\n"
            "step 1\n90%\nTraceback: boom\n"
            "rank 0 (pid 1000): stopped by the launcher (SIGTERM)\n"
            "rank 2 (pid 1002): stopped by the launcher (SIGTERM)\n"
            "rank 3 (pid 1003): stopped by the launcher (SIGTERM)\n");
}

TEST_CASE("more than four ranks with one outcome share one line", "[failure_report]") {
  TempDir dir;
  const std::string report = failure_report(failed_job(dir, 32, 1, 20));
  CHECK_THAT(report, Catch::Matchers::EndsWith("Traceback: boom\n"
                                               "30 ranks (0, 2-19, 21-31): stopped by the launcher (SIGTERM)\n"
                                               "rank 20 (pid 1020): killed by the launcher (SIGKILL)\n"));
}

TEST_CASE("a job stopped by a signal says which process got it, from whom", "[failure_report]") {
  TempDir dir;
  JobResult result = failed_job(dir, 2, 0);
  result.first_failure.reset();
  result.ranks[0].status = ExitStatus{ExitStatus::Kind::signaled, SIGTERM};
  result.ranks[0].terminated_by_launcher = true;
  result.stop_reason = StopReason::signaled;
  result.stop_signal = SIGTERM;
  result.stop_detail = "its supervisor process got SIGTERM from pid 1 (systemd)";
  CHECK(result.exit_code() == 128 + SIGTERM);
  CHECK(failure_report(result) ==
        "the job was stopped because its supervisor process got SIGTERM from pid 1 (systemd)\n"
        "rank 0 (pid 1000): stopped by the launcher (SIGTERM)\n"
        "rank 1 (pid 1001): stopped by the launcher (SIGTERM)\n");
}

TEST_CASE("a stop that came while this server waited for the others says so", "[failure_report]") {
  TempDir dir;
  JobResult result = failed_job(dir, 2, 0);
  result.first_failure.reset();
  for (RankResult& r : result.ranks) {
    r.status = ExitStatus{};
    r.terminated_by_launcher = false;
  }
  result.stop_reason = StopReason::requested;
  result.stopped_in = JobState::waiting_for_servers;
  CHECK(result.exit_code() == 130);
  CHECK(failure_report(result) ==
        "the job was stopped on request\n"
        "(it came after this server's ranks had ended, while it waited for the other servers)\n"
        "rank 0 (pid 1000): exit code 0\n"
        "rank 1 (pid 1001): exit code 0\n");
}

TEST_CASE("a job stopped by its timeout says how long it ran", "[failure_report]") {
  JobResult result;
  const auto start = std::chrono::system_clock::now();
  for (int i = 0; i < 2; ++i) {
    RankResult r;
    r.rank = i;
    r.pid = 2000 + i;
    r.started = start + std::chrono::milliseconds(10 * i);
    r.ended = start + std::chrono::milliseconds(i == 0 ? 2500 : 2040);
    r.status = ExitStatus{ExitStatus::Kind::signaled, SIGTERM};
    r.terminated_by_launcher = true;
    result.ranks.push_back(r);
  }
  result.stop_reason = StopReason::timed_out;
  CHECK(failure_report(result) ==
        "the job ran past its timeout and was stopped; it ran 2.5 s in all\n"
        "rank 0 (pid 2000): stopped by the launcher (SIGTERM)\n"
        "rank 1 (pid 2001): stopped by the launcher (SIGTERM)\n");
}
