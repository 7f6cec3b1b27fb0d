// The job record across servers: the hub's clock samples from heartbeats
// (peers/peer_clock.hpp), members' parts carried to the hub before their
// `over`, the hub waiting for them after a stop, the joined record sent
// back, the part fitted to its budget, and the record joining the parts
// (record/job_record.hpp).
#include <catch2/catch.hpp>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "davincirun/environment.hpp"
#include "peer_test_agent.hpp"
#include "peers/peer_clock.hpp"
#include "record/job_record.hpp"

using namespace davincirun;
using namespace davincirun::detail;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using davincirun_test::Agent;
using davincirun_test::config_for;

namespace {

PeerConfig sending_parts(std::uint32_t index, int port, std::size_t servers = 3) {
  PeerConfig c = config_for(index, port, servers);
  c.heartbeat_interval = 100ms;
  c.sends_part = true;
  c.gather_timeout = 3000ms;
  return c;
}

PeerAttemptOver over(bool success) {
  PeerAttemptOver o;
  o.success = success;
  return o;
}

bool joined_all(PeerAgent& hub) {
  for (int i = 0; i < 300; ++i) {
    if (hub.waiting_for().find("not joined") == std::string::npos) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

}  // namespace

TEST_CASE("a heartbeat's echo gives the member's clock offset, within half the round trip", "[peers][record]") {
  // The member's clock is 5 s ahead; 1 ms each way; it held the hub's beat 3 ms.
  PeerHeartbeat beat;
  beat.echo_us = 1'000'000;                      // the hub sent its beat (hub clock)
  beat.held_us = 3'000;                          // heard at member 6'001'000, answered 3 ms later
  beat.sent_us = 6'004'000;                      // member clock
  const auto s = clock_sample(beat, 1'005'000);  // heard back (hub clock)
  REQUIRE(s);
  CHECK(s->offset_s == Approx(-5.0));
  CHECK(s->error_s == Approx(0.001));

  // 3 ms out, 1 ms back: the offset is off by 1 ms, within the stated error (2 ms).
  beat.sent_us = 6'006'000;
  const auto skewed = clock_sample(beat, 1'007'000);
  REQUIRE(skewed);
  CHECK(std::abs(skewed->offset_s + 5.0) <= skewed->error_s + 1e-9);

  beat.echo_us = 0;  // it heard nothing of ours yet
  CHECK_FALSE(clock_sample(beat, 1'005'000));
  beat.echo_us = 1'000'000;
  beat.held_us = 10'000'000;  // held longer than the round trip: not our beat
  CHECK_FALSE(clock_sample(beat, 1'005'000));

  std::optional<ClockSample> kept;
  keep_best(kept, {1.0, 0.004});
  keep_best(kept, {2.0, 0.001});
  keep_best(kept, {3.0, 0.002});
  CHECK(kept->offset_s == 2.0);
}

TEST_CASE("members' parts reach the hub whole, with a clock sample each", "[peers][record]") {
  const int port = find_free_port();
  Agent hub(sending_parts(0, port));
  Agent b(sending_parts(1, port));
  Agent c(sending_parts(2, port));
  REQUIRE(joined_all(hub.agent()));
  const std::string big(3 * max_part_chunk_bytes + 17, 'x');  // four pieces
  b.agent().finish(over(true), R"({"server":"b"})");
  c.agent().finish(over(true), "{\"big\":\"" + big + "\"}");
  hub.agent().finish(true);
  REQUIRE(hub.wait_returned());
  const auto gathered = hub.agent().gathered();
  REQUIRE(gathered.size() == 2);
  CHECK(gathered[0].server_index == 1);
  CHECK(gathered[0].part == R"({"server":"b"})");
  CHECK(gathered[1].part == "{\"big\":\"" + big + "\"}");
  for (const auto& g : gathered) {
    REQUIRE(g.clock);                                               // the welcome's heartbeat asked for an echo
    CHECK(std::abs(g.clock->offset_s) <= g.clock->error_s + 0.05);  // one machine, one clock
    CHECK(g.clock->error_s < 0.5);
  }
  CHECK(b.agent().gathered().empty());  // only the hub gathers
}

TEST_CASE("after a stop the hub waits for the parts of members still stopping, not for those lost", "[peers][record]") {
  const int port = find_free_port();
  Agent hub(sending_parts(0, port));
  Agent b(sending_parts(1, port));
  auto c = std::make_unique<Agent>(sending_parts(2, port));
  REQUIRE(joined_all(hub.agent()));
  PeerEvent failure;
  failure.server_id = "10.0.0.12";
  failure.detail = "ValueError: bad batch";
  b.agent().report(failure);
  REQUIRE(hub.wait_stops(1));
  hub.agent().finish(false);
  // Member b's ranks are still ending: the hub waits for its part.
  CHECK_FALSE(hub.wait([] { return false; }, 300ms));
  CHECK_FALSE(hub.agent().waiting_for().empty());
  c.reset();  // member c's agent is killed: not waited for
  b.agent().finish(over(false), R"({"part":"of b"})");
  REQUIRE(hub.wait_returned());
  const auto gathered = hub.agent().gathered();
  REQUIRE(gathered.size() == 2);
  CHECK(gathered[0].part == R"({"part":"of b"})");
  CHECK(gathered[1].part.empty());
  CHECK_THAT(gathered[1].why, Contains("was lost"));
}

TEST_CASE("after a stop the hub gives up on a part after the gather timeout", "[peers][record]") {
  const int port = find_free_port();
  PeerConfig hub_config = sending_parts(0, port, 2);
  hub_config.gather_timeout = 500ms;
  Agent hub(hub_config);
  Agent b(sending_parts(1, port, 2));
  REQUIRE(joined_all(hub.agent()));
  PeerEvent stop;
  stop.kind = PeerEventKind::stopped;
  stop.server_id = "10.0.0.11";
  stop.detail = "stop requested";
  hub.agent().report(stop);
  hub.agent().finish(false);
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(hub.wait_returned());
  CHECK(std::chrono::steady_clock::now() - start < 2000ms);
  REQUIRE(hub.agent().gathered().size() == 1);
  CHECK_THAT(hub.agent().gathered()[0].why, Contains("did not arrive"));
}

TEST_CASE("the hub sends the joined record back to every member that sent its part", "[peers][record]") {
  const int port = find_free_port();
  Agent hub(sending_parts(0, port));
  Agent b(sending_parts(1, port));
  Agent c(sending_parts(2, port));
  REQUIRE(joined_all(hub.agent()));
  b.agent().finish(over(true), R"({"server":"b"})");
  c.agent().finish(over(true), R"({"server":"c"})");
  hub.agent().finish(true);
  REQUIRE(hub.wait_returned());
  REQUIRE(b.wait_returned());
  REQUIRE(c.wait_returned());
  // Larger than a socket's buffers: the hub waits for the members to read.
  std::string record = "{\"ranks\":\"";
  for (int i = 0; record.size() < (8u << 20); ++i) record += std::to_string(i % 10);
  record += "\"}";
  std::size_t shared = 0;
  std::thread sharing([&] { shared = hub.agent().share_record(record, 5000ms); });
  std::string why_b;
  std::string why_c;
  CHECK(b.agent().await_record(why_b) == record);
  CHECK(c.agent().await_record(why_c) == record);
  sharing.join();
  CHECK(shared == 2);
  CHECK(why_b.empty());
}

TEST_CASE("a record too large for every member is not sent, and the members say why at once", "[peers][record]") {
  const int port = find_free_port();
  Agent hub(sending_parts(0, port, 2));
  Agent b(sending_parts(1, port, 2));
  REQUIRE(joined_all(hub.agent()));
  b.agent().finish(over(true), R"({"server":"b"})");
  hub.agent().finish(true);
  REQUIRE(hub.wait_returned());
  REQUIRE(b.wait_returned());
  CHECK(hub.agent().share_record(std::string(max_shared_record_bytes + 1, 'x'), 5000ms) == 0);
  std::string why;
  const auto start = std::chrono::steady_clock::now();
  CHECK(b.agent().await_record(why).empty());
  CHECK(std::chrono::steady_clock::now() - start < 1000ms);
  CHECK_THAT(why, Contains("too large"));
}

TEST_CASE("a member whose hub is gone does not wait for the record", "[peers][record]") {
  const int port = find_free_port();
  auto hub = std::make_unique<Agent>(sending_parts(0, port, 2));
  Agent b(sending_parts(1, port, 2));
  REQUIRE(joined_all(hub->agent()));
  b.agent().finish(over(true), R"({"server":"b"})");
  hub->agent().finish(true);
  REQUIRE(hub->wait_returned());
  REQUIRE(b.wait_returned());
  hub.reset();  // its agent ends without sending the record
  std::string why;
  const auto start = std::chrono::steady_clock::now();
  CHECK(b.agent().await_record(why).empty());
  CHECK(std::chrono::steady_clock::now() - start < 1000ms);
  CHECK_THAT(why, Contains("closed its connection"));
}

TEST_CASE("every server learns the job's pace from the heartbeats, and the hub names members' slow ranks",
          "[peers][record]") {
  const int port = find_free_port();
  std::mutex mutex;
  std::vector<std::optional<double>> heard(3);  // the job's pace, by server, as last told
  const auto paced = [&](std::uint32_t index, std::optional<double> position, std::vector<std::string> slow) {
    return [&, index, position, slow](PeerAgent& a) {
      a.on_pace([position, slow] { return ServerPace{position, slow}; },
                [&, index](std::optional<double> pace) {
                  const std::lock_guard<std::mutex> lock(mutex);
                  heard[index] = pace;
                });
    };
  };
  Agent hub(sending_parts(0, port), paced(0, 10.0, {}));
  Agent b(sending_parts(1, port), paced(1, 100.0, {"rank 9"}));
  Agent c(sending_parts(2, port), paced(2, std::nullopt, {}));  // no progress known there
  REQUIRE(joined_all(hub.agent()));
  // The upper median of 10 and 100, on every server that hears the hub.
  const auto told = [&] {
    const std::lock_guard<std::mutex> lock(mutex);
    return heard[0] == 100.0 && heard[1] == 100.0 && heard[2] == 100.0;
  };
  bool all_told = false;
  for (int i = 0; i < 300 && !all_told; ++i) {
    std::this_thread::sleep_for(10ms);
    all_told = told();
  }
  CHECK(all_told);
  REQUIRE(hub.wait(
      [&] {
        for (const auto& line : hub.notices_unlocked()) {
          if (line.find("rank 9 on server 10.0.0.12 is slow") != std::string::npos) return true;
        }
        return false;
      },
      3000ms));
}

TEST_CASE("a part over its budget loses metric points first, then its metrics", "[record]") {
  RecordJson part = {{"server", {{"server_id", "10.0.0.12"}}}, {"events", RecordJson::array()}};
  RecordJson metrics;
  for (const char* name : {"loss", "acc", "lr"}) {
    for (int i = 0; i < 1000; ++i) metrics[name].push_back({i, 0.5, 1.7e9 + i});
  }
  part["ranks"] = {{{"rank", 8}, {"metrics", metrics}}, {{"rank", 9}, {"metrics", metrics}}};
  const std::size_t whole = part_text(part, SIZE_MAX).size();
  const std::string fitted = part_text(part, whole / 4);
  REQUIRE_FALSE(fitted.empty());
  CHECK(fitted.size() <= whole / 4);
  const RecordJson back = RecordJson::parse(fitted);
  const RecordJson& loss = back["ranks"][1]["metrics"]["loss"];
  CHECK(loss.size() < 1000);
  CHECK(loss.size() >= 100);
  CHECK(loss.front()[0] == 0);  // the first and last points are kept
  CHECK(loss.back()[0] == 999);

  const std::string bare = part_text(part, 200);  // only without metrics
  REQUIRE_FALSE(bare.empty());
  CHECK(RecordJson::parse(bare)["ranks"][0]["metrics"].empty());
  CHECK(part_text(part, 10).empty());
}

TEST_CASE("the record joins the servers' parts on one clock, and names the first failure's root cause", "[record]") {
  JobSpec spec;
  spec.job_id = "job-7";
  spec.server_id = "10.0.0.11";
  spec.world_size = 2;
  const JobResult result;
  const auto part = [](const std::string& server, int rank, double ended, const char* how) {
    RecordJson p;
    p["server"] = {{"server_id", server}, {"clock_offset_s", 0.0}};
    p["ranks"] = {{{"rank", rank},
                   {"role", "rank"},
                   {"server_id", server},
                   {"started", 100.0},
                   {"ended", ended},
                   {"ended_how", how},
                   {"status", "exit 1"},
                   {"activity", RecordJson::object()},
                   {"progress", RecordJson::array()},
                   {"slow", RecordJson::array()},
                   {"metrics", RecordJson::object()}}};
    p["events"] = {{{"time", ended}, {"server_id", server}, {"kind", "exit"}, {"text", "rank"}}};
    p["root_cause"] = {{"server_id", server}, {"rank", rank}, {"exception", "Error on " + server}};
    return p;
  };
  std::vector<AlignedPart> parts;
  parts.push_back({part("10.0.0.11", 0, 110.0, "failed"), 0.0, 0.0});
  // The member's clock is 5 s behind: its rank 1 failed first, at 104 + 5 = 109 on the hub's clock.
  parts.push_back({part("10.0.0.12", 1, 104.0, "failed"), 5.0, 0.002});
  const RecordJson record =
      job_record(spec, result, std::move(parts), "measured", {{"10.0.0.13", "was lost: its host went down"}});
  REQUIRE(record["ranks"].size() == 2);
  CHECK(record["ranks"][1]["ended"] == 109.0);
  CHECK(record["events"][0]["server_id"] == "10.0.0.12");  // on one time line, in order
  CHECK(record["events"][0]["time"] == 109.0);
  CHECK(record["first_failure"]["server_id"] == "10.0.0.12");
  CHECK(record["root_cause"]["exception"] == "Error on 10.0.0.12");
  CHECK(record["servers"][1]["clock_offset_s"] == 5.0);
  CHECK(record["servers"][1]["clock_error_s"] == 0.002);
  CHECK(record["clock"]["max_error_s"] == 0.002);
  REQUIRE(record["missing_servers"].size() == 1);
  CHECK(record["missing_servers"][0]["why"] == "was lost: its host went down");

  // As text (job.json, the page, what members get), which a member checks
  // before it writes it: the job id read back, bytes that are not UTF-8 replaced.
  RecordJson odd = record;
  odd["stop_detail"] = "bytes \xff\xfe";
  const std::string text = record_text(odd);
  CHECK(nlohmann::json::parse(text)["job_id"] == "job-7");
  std::string job_id;
  CHECK(record_text_shaped(text, job_id));
  CHECK(job_id == "job-7");
}

TEST_CASE("a member writes what the hub sent only when it is a record: an object with job_id, servers and ranks",
          "[record]") {
  std::string id = "unchanged";
  CHECK(record_text_shaped(R"({"job_id": "j", "servers": [{}], "ranks": [], "x": [1, {"y": null}]})", id));
  CHECK(id == "j");
  for (const char* text :
       {"", "null", "[]", "{", R"({"job_id": "j", "servers": [], "ranks": []} x)",
        R"({"job_id": 7, "servers": [], "ranks": []})", R"({"servers": [], "ranks": []})",
        R"({"job_id": "j", "servers": {}, "ranks": []})", R"({"job_id": "j", "servers": []})",
        R"({"job_id": "j", "servers": [], "ranks": [1]})", R"({"job_id": "j", "servers": [], "ranks": [], "x": [1,]})",
        "{\"job_id\": \"\xff\", \"servers\": [], \"ranks\": []}"}) {
    INFO(text);
    id = "unchanged";
    CHECK_FALSE(record_text_shaped(text, id));
    CHECK(id == "unchanged");
  }
}
