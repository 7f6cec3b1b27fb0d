// The attempts of a job of several servers that restarts
// (peers/peer_attempts.cpp): agents in one process on loopback, each on a
// thread of its own. The hub decides for every server once it heard each;
// a refusal anywhere ends the job on every server; a member started again
// after it was lost is welcomed at the job's attempt.
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "davincirun/environment.hpp"
#include "peer_test_agent.hpp"
#include "peers/peer_agent.hpp"
#include "peers/peer_socket.hpp"

using namespace davincirun;
using namespace davincirun::detail;
using namespace std::chrono_literals;
using davincirun_test::Agent;

namespace {

PeerConfig restarting(std::uint32_t index, int port) {
  PeerConfig c;
  c.hub = index == 0;
  c.hub_address = "127.0.0.1";
  c.port = port;
  c.server_index = index;
  c.server_ids = {"10.0.0.11", "10.0.0.12"};
  c.job_key = "the job's key";
  c.peer_timeout = 2000ms;
  c.heartbeat_interval = heartbeat_interval_for(c.peer_timeout);
  c.connect_timeout = 5000ms;
  c.max_restarts = 2;
  c.awaits_start = index != 0;
  return c;
}

PeerAttemptOver failed(bool refuses = false, std::string decision = {}) {
  PeerAttemptOver over;
  over.refuses_restart = refuses;
  over.decision = std::move(decision);
  over.root_cause = refuses ? "ValueError: again" : "";
  return over;
}

PeerEvent failure_on(const std::string& server) {
  PeerEvent e;
  e.kind = PeerEventKind::rank_failed;
  e.server_id = server;
  e.rank = 1;
  e.status = {ExitStatus::Kind::exited, 1};
  e.detail = "ValueError: flaky\n";
  return e;
}

bool starts_as(PeerAgent& agent, std::uint32_t attempt) {
  for (int i = 0; i < 500; ++i) {
    if (agent.attempt_to_start() == attempt) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

}  // namespace

TEST_CASE("the hub restarts every server after a failure, and a refusal on any server ends the job on all",
          "[peers][restarts]") {
  const int port = find_free_port();
  Agent hub(restarting(0, port));
  Agent member(restarting(1, port));
  REQUIRE(starts_as(member.agent(), 1));  // welcomed at attempt 1: its ranks start

  // Attempt 1: a rank fails on the member; every server's attempt ends.
  member.agent().report(failure_on("10.0.0.12"));
  REQUIRE(hub.wait_stops(1));
  member.agent().finish(failed());
  hub.agent().finish(failed());
  for (Agent* a : {&hub, &member}) {
    const auto d = a->wait_decision(1);
    REQUIRE(d);
    CHECK(d->attempt == 1);
    CHECK(d->restart);
    CHECK(d->decision == "restarted (1 of 2 restarts)");
  }

  // Attempt 2: the member's judge refuses (the same error again): no server restarts.
  member.agent().report(failure_on("10.0.0.12"));
  REQUIRE(hub.wait_stops(2));
  hub.agent().finish(failed());
  member.agent().finish(failed(true, "not restarted: it failed as attempt 1 did"));
  for (Agent* a : {&hub, &member}) {
    const auto d = a->wait_decision(2);
    REQUIRE(d);
    CHECK(d->attempt == 2);
    CHECK_FALSE(d->restart);
    CHECK(d->decision == "not restarted: it failed as attempt 1 did");
    CHECK(d->root_cause == "ValueError: again");
    CHECK(a->wait_returned());
  }
}

TEST_CASE("a server done before another failed restarts too, told what stopped the attempt", "[peers][restarts]") {
  const int port = find_free_port();
  Agent hub(restarting(0, port));
  Agent member(restarting(1, port));
  REQUIRE(starts_as(member.agent(), 1));
  member.agent().finish(PeerAttemptOver{1, true, false, "", ""});  // every rank there exited 0
  std::this_thread::sleep_for(100ms);
  hub.agent().report(failure_on("10.0.0.11"));
  hub.agent().finish(failed());
  const auto d = member.wait_decision(1);
  REQUIRE(d);
  CHECK(d->restart);
  CHECK(member.unheard(1));         // the stop came after its own attempt was over: the decision carries it
  CHECK(member.stop_count() == 0);  // nothing of its own ran any more to stop
}

TEST_CASE("a member lost and started again is welcomed at the job's next attempt", "[peers][restarts]") {
  const int port = find_free_port();
  Agent hub(restarting(0, port));
  {
    Agent member(restarting(1, port));
    REQUIRE(starts_as(member.agent(), 1));
  }  // its agent is gone: the hub stops, and its attempt ends
  REQUIRE(hub.wait_stops(1));
  hub.agent().finish(failed());
  const auto d = hub.wait_decision(1);
  REQUIRE(d);
  CHECK(d->restart);  // the lost server may rejoin
  Agent again(restarting(1, port));
  CHECK(starts_as(again.agent(), 2));
}

TEST_CASE("a member that joins while the job decides waits for the decision to start", "[peers][restarts]") {
  const int port = find_free_port();
  PeerConfig hub_config = restarting(0, port);
  Agent hub(hub_config);
  hub.agent().report(failure_on("10.0.0.11"));  // attempt 1 fails before the member came
  Agent member(restarting(1, port));
  std::this_thread::sleep_for(300ms);
  CHECK_FALSE(member.agent().attempt_to_start());  // it ran nothing of attempt 1
  hub.agent().finish(failed());
  CHECK(starts_as(member.agent(), 2));
}
