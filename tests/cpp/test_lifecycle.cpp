// The job's life cycle (lifecycle.hpp): the table answers every event in
// every state exactly once, the test hold is read strictly, and a
// Supervisor whose ranks are done and that waits for the other servers
// (a ServerLink) answers every stop there, and ends when they are done.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <atomic>
#include <set>
#include <thread>

#include "davincirun/errors.hpp"
#include "davincirun/lifecycle.hpp"
#include "davincirun/supervisor.hpp"
#include "test_supervisor_support.hpp"

using namespace davincirun;
using namespace davincirun_test;
using Catch::Matchers::Contains;

TEST_CASE("the life-cycle table has one answer, with a reason, for every event in every state", "[lifecycle]") {
  const auto& cells = job_transitions();
  REQUIRE(cells.size() == job_state_count * job_event_count);
  std::set<std::pair<int, int>> seen;
  for (const JobTransition& t : cells) {
    INFO(to_string(t.event) << " in " << to_string(t.state));
    CHECK(seen.emplace(static_cast<int>(t.state), static_cast<int>(t.event)).second);
    CHECK(&job_transition(t.state, t.event) == &t);
    CHECK(std::string(t.why).size() > 5);
    const bool moves = t.answer == JobAnswer::proceed || t.answer == JobAnswer::escalate ||
                       (t.answer == JobAnswer::stop && t.next != t.state);
    CHECK(moves == (t.next != t.state));
    if (t.answer == JobAnswer::escalate) CHECK(t.next == JobState::killing);
    CHECK_FALSE((t.tells_peers && t.answer != JobAnswer::stop));
  }
  // Every state answers a stop: a person's, an engine's, the launcher gone.
  for (std::size_t s = 0; s < job_state_count; ++s) {
    const auto state = static_cast<JobState>(s);
    for (const JobEvent e : {JobEvent::stop_request, JobEvent::engine_signal, JobEvent::launcher_gone}) {
      INFO(to_string(e) << " in " << to_string(state));
      CHECK(job_transition(state, e).answer != JobAnswer::impossible);
    }
  }
  CHECK(std::string(to_string(JobState::waiting_for_servers)) == "waiting_for_servers");
  CHECK(std::string(to_string(JobEvent::hub_unreachable)) == "hub_unreachable");
}

TEST_CASE("DAVINCIRUN_TEST_HOLD names a state and milliseconds, or is refused", "[lifecycle]") {
  ::unsetenv("DAVINCIRUN_TEST_HOLD");
  CHECK_FALSE(test_hold_from_environment());
  ::setenv("DAVINCIRUN_TEST_HOLD", "draining:2500", 1);
  const auto hold = test_hold_from_environment();
  REQUIRE(hold);
  CHECK(hold->state == JobState::draining);
  CHECK(hold->duration == std::chrono::milliseconds(2500));
  for (const char* bad : {"draining", "drain:10", "draining:", "draining:-1", "draining:10x"}) {
    ::setenv("DAVINCIRUN_TEST_HOLD", bad, 1);
    CHECK_THROWS_AS(test_hold_from_environment(), ConfigError);
  }
  ::unsetenv("DAVINCIRUN_TEST_HOLD");
}

namespace {

// A job of one rank that exits 0, linked to "other servers" that this test plays.
struct WaitingJob {
  TempDir dir;
  RecordingSink console;
  std::unique_ptr<Supervisor> sup;
  std::atomic<int> done_calls{0};
  std::atomic<bool> success{false};
  std::vector<std::string> told;  // local stops told to the other servers

  WaitingJob() {
    sup = std::make_unique<Supervisor>(std::vector<RankLaunch>{launch(dir, 0, {helper("child_exit"), "0"})},
                                       SupervisorOptions{}, console);
    ServerLink link;
    link.local_done = [this](bool ok, const AttemptVerdict*, const JobResult&) {
      success = ok;
      ++done_calls;
    };
    link.local_stop = [this](StopReason reason, const RankResult*, const std::string& why) {
      told.push_back(std::string(to_string(reason)) + ": " + why);
    };
    link.waiting_for = [] { return std::string("server 10.0.0.12 (running)"); };
    sup->set_server_link(std::move(link));
  }

  // Runs the job on a thread; returns once it waits for the other servers.
  std::thread start(JobResult& out) {
    std::thread t([this, &out] { out = run_with_deadline(*sup).result; });
    for (int i = 0; i < 500 && sup->state() != JobState::waiting_for_servers; ++i) {
      std::this_thread::sleep_for(10ms);
    }
    REQUIRE(sup->state() == JobState::waiting_for_servers);
    return t;
  }
};

}  // namespace

TEST_CASE("a server waiting for the others ends when they are done, or on any stop", "[lifecycle][supervisor]") {
  WaitingJob job;
  JobResult result;
  std::thread t = job.start(result);
  CHECK(job.done_calls == 1);
  CHECK(job.success);

  SECTION("the other servers are done") {
    job.sup->servers_done();
    t.join();
    CHECK(result.success());
    CHECK(job.told.empty());
  }
  SECTION("a stop request") {
    job.sup->request_stop();
    t.join();
    CHECK(result.stop_reason == StopReason::requested);
    CHECK(result.stopped_in == JobState::waiting_for_servers);
    CHECK(result.exit_code() == 130);
    REQUIRE(job.told.size() == 1);
    CHECK(job.told[0] == "requested: stop requested");
    CHECK_THAT(job.console.text(),
               Contains("stop requested while this server waited for server 10.0.0.12 (running): stopped waiting"));
  }
  SECTION("a signal, from a known sender") {
    SignalOrigin origin;
    origin.receiver = SignalReceiver::launcher;
    origin.sender_pid = ::getpid();
    job.sup->request_stop_by_signal(SIGTERM, origin);
    t.join();
    CHECK(result.stop_reason == StopReason::signaled);
    CHECK(result.exit_code() == 128 + SIGTERM);
    CHECK(result.stop_signal_origin.receiver == SignalReceiver::launcher);
    CHECK(result.stop_signal_origin.sender_pid == ::getpid());
    CHECK_FALSE(result.stop_signal_origin.sender_name.empty());  // this test program's /proc/self/comm
    CHECK_THAT(result.stop_detail, Contains("the launcher got SIGTERM from pid " + std::to_string(::getpid())));
  }
  SECTION("the launcher gone") {
    job.sup->request_stop_orphaned();
    t.join();
    CHECK(result.stop_reason == StopReason::launcher_gone);
    CHECK(result.stopped_in == JobState::waiting_for_servers);
  }
  SECTION("another server's failure") {
    PeerStop stop;
    stop.server_id = "10.0.0.12";
    stop.status = ExitStatus{ExitStatus::Kind::exited, 5};
    stop.rank = 1;
    job.sup->request_stop_by_peer(JobEvent::peer_failed, stop);
    t.join();
    CHECK(result.stop_reason == StopReason::peer_failed);
    CHECK(result.exit_code() == 5);
    CHECK(job.told.empty());  // the hub told us: nothing to tell back
    CHECK(result.stop_detail == "rank 1 on server 10.0.0.12 failed with exit code 5");
  }
  CHECK(result.ranks.at(0).status.success());
  check_nothing_left(result);
}
