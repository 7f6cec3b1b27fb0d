// The peer channel's agents (peers/peer_agent.hpp), several in one process
// on loopback, each on a thread of its own as in a job's supervisor
// process: they join, carry one server's failure to every other, notice a
// closed or silent connection, refuse another job's agent, give up on an
// unreachable hub, end together on success and stop a silent job.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "davincirun/environment.hpp"
#include "davincirun/errors.hpp"
#include "peer_test_agent.hpp"
#include "peers/peer_agent.hpp"
#include "peers/peer_socket.hpp"

using namespace davincirun;
using namespace davincirun::detail;
using namespace std::chrono_literals;
using davincirun_test::config_for;

namespace {

// One agent on its thread, with what it told its owner.
class TestAgent {
 public:
  TestAgent(PeerConfig config, std::function<std::uint64_t()> silence = {}) {
    agent_ = std::make_unique<PeerAgent>(
        std::move(config),
        [this](const PeerEvent& e) {
          std::lock_guard<std::mutex> lock(mutex_);
          stops_.push_back(e);
          changed_.notify_all();
        },
        [this](const std::string& line, bool /*info*/) {
          std::lock_guard<std::mutex> lock(mutex_);
          notices_ += line + "\n";
          changed_.notify_all();
        },
        std::move(silence));
    thread_ = std::thread([this] {
      agent_->run();
      std::lock_guard<std::mutex> lock(mutex_);
      returned_ = true;
      changed_.notify_all();
    });
  }
  ~TestAgent() {
    agent_->abort();
    thread_.join();
  }
  PeerAgent& agent() { return *agent_; }
  // Waits up to `limit` for a stop; nullopt if none came.
  std::optional<PeerEvent> wait_stop(std::chrono::milliseconds limit = 5000ms) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, limit, [this] { return !stops_.empty(); });
    if (stops_.empty()) return std::nullopt;
    return stops_.front();
  }
  bool wait_returned(std::chrono::milliseconds limit = 5000ms) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, limit, [this] { return returned_; });
  }
  bool wait_notice(const std::string& part, std::chrono::milliseconds limit = 5000ms) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, limit, [&] { return notices_.find(part) != std::string::npos; });
  }
  std::size_t stop_count() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stops_.size();
  }
  std::string notices() {
    std::lock_guard<std::mutex> lock(mutex_);
    return notices_;
  }

 private:
  std::unique_ptr<PeerAgent> agent_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<PeerEvent> stops_;
  std::string notices_;
  bool returned_ = false;
};

PeerEvent failure_on(const std::string& server, int rank) {
  PeerEvent e;
  e.kind = PeerEventKind::rank_failed;
  e.server_id = server;
  e.rank = rank;
  e.status = {ExitStatus::Kind::exited, 3};
  e.detail = "ValueError: bad batch";
  return e;
}

}  // namespace

TEST_CASE("one server's failure stops every other server's agent, naming it", "[peers]") {
  const int port = find_free_port();
  TestAgent hub(config_for(0, port));
  TestAgent b(config_for(1, port));
  TestAgent c(config_for(2, port));
  REQUIRE(hub.wait_notice("agents of all 3 servers are connected"));
  REQUIRE(b.wait_notice("joined the agents of the job at 127.0.0.1"));
  REQUIRE(c.wait_notice("joined"));

  c.agent().report(failure_on("10.0.0.13", 5));
  for (TestAgent* other : {&hub, &b}) {
    const auto stop = other->wait_stop();
    REQUIRE(stop);
    CHECK(stop->kind == PeerEventKind::rank_failed);
    CHECK(stop->server_id == "10.0.0.13");
    CHECK(stop->rank == 5);
    CHECK(stop->status.value == 3);
    CHECK(stop->detail == "ValueError: bad batch");
  }
  CHECK(c.stop_count() == 0);  // the failing server stops by itself
  c.agent().finish(false);
  CHECK(c.wait_returned());
  hub.agent().finish(false);
  CHECK(hub.wait_returned());
}

TEST_CASE("an agent that goes away, or falls silent, is lost, and the others stop", "[peers]") {
  const int port = find_free_port();
  TestAgent hub(config_for(0, port));
  auto b = std::make_unique<TestAgent>(config_for(1, port));
  TestAgent c(config_for(2, port));
  REQUIRE(hub.wait_notice("are connected"));

  SECTION("its connection closes (the agent was killed)") {
    b.reset();  // aborts its agent: its socket closes without "done"
    for (TestAgent* other : {&hub, &c}) {
      const auto stop = other->wait_stop();
      REQUIRE(stop);
      CHECK(stop->kind == PeerEventKind::lost);
    }
    CHECK(hub.wait_stop()->server_id == "10.0.0.12");
    // A FIN, or a reset when the killed agent left the hub's last heartbeat unread: the kernel decides.
    CHECK_THAT(hub.wait_stop()->detail,
               Catch::StartsWith("was lost ") && Catch::Contains(" after the agents met: ") &&
                   (Catch::Contains("closed its connection") || Catch::Contains("broke: Connection reset by peer")));
  }
}

TEST_CASE("a member that completed the handshake and then says nothing is lost after the peer timeout", "[peers]") {
  const int port = find_free_port();
  PeerConfig hub_config = config_for(0, port, 2);
  hub_config.peer_timeout = 300ms;
  hub_config.heartbeat_interval = 50ms;
  TestAgent hub(hub_config);
  // A member by hand: handshake, then silence, as behind a cut link.
  std::string error;
  UniqueFd fd = connect_to("127.0.0.1", port, error);
  REQUIRE(fd);
  PeerSeal seal("the job's key", 'M');
  PeerFrameParser parser;
  auto read_frame = [&] {
    for (int i = 0; i < 500; ++i) {
      if (auto f = parser.next()) return *f;
      char buf[4096];
      const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
      if (n > 0) parser.feed(std::string_view(buf, static_cast<std::size_t>(n)));
      std::this_thread::sleep_for(10ms);
    }
    FAIL("no frame from the hub");
    return RawPeerFrame{};
  };
  const RawPeerFrame challenge = read_frame();
  seal.open(challenge);
  PeerHello hello;
  hello.nonce = random_nonce();
  hello.server_index = 1;
  hello.server_id = "10.0.0.12";
  seal.rekey(peer_session_key("the job's key", challenge.payload, hello.nonce));
  std::string out = seal.seal(PeerFrame::hello, encode_hello(hello));
  REQUIRE(flush_some(fd.get(), out));
  const RawPeerFrame welcome = read_frame();
  seal.open(welcome);
  CHECK(welcome.type == PeerFrame::welcome);

  const auto stop = hub.wait_stop(3000ms);
  REQUIRE(stop);
  CHECK(stop->kind == PeerEventKind::lost);
  CHECK(stop->server_id == "10.0.0.12");
  CHECK_THAT(stop->detail, Catch::Contains("no heartbeat from its agent at 127.0.0.1"));
}

TEST_CASE("another job's agent is refused, and gives up with the reason once its wait is over", "[peers]") {
  const int port = find_free_port();
  TestAgent hub(config_for(0, port, 2));
  PeerConfig stranger_config = config_for(1, port, 2);
  stranger_config.job_key = "another job's key";
  stranger_config.connect_timeout = 1000ms;
  TestAgent stranger(stranger_config);
  const auto stop = stranger.wait_stop();
  REQUIRE(stop);
  CHECK(stop->kind == PeerEventKind::unreachable);
  CHECK_THAT(stop->detail, Catch::Contains("could not be reached: its agent at 127.0.0.1"));
  CHECK_THAT(stop->detail, Catch::Contains("authentication failed"));
  CHECK(hub.stop_count() == 0);

  // A hello tagged with another key is refused by the hub, which says so.
  std::string error;
  UniqueFd fd = connect_to("127.0.0.1", port, error);
  REQUIRE(fd);
  PeerSeal seal("another job's key", 'M');
  PeerHello hello;
  hello.nonce = random_nonce();
  hello.server_index = 1;
  hello.server_id = "10.0.0.12";
  std::string out = seal.seal(PeerFrame::hello, encode_hello(hello));
  REQUIRE(flush_some(fd.get(), out));
  CHECK(hub.wait_notice("refused a connection from 127.0.0.1"));
  CHECK_THAT(hub.notices(), Catch::Contains("authentication failed"));
  CHECK(hub.stop_count() == 0);
}

TEST_CASE("a member that cannot reach the hub gives up after the connect timeout, naming the address", "[peers]") {
  PeerConfig config = config_for(1, find_free_port(), 2);  // nobody listens there
  config.connect_timeout = 500ms;
  TestAgent member(config);
  const auto stop = member.wait_stop();
  REQUIRE(stop);
  CHECK(stop->kind == PeerEventKind::unreachable);
  CHECK_THAT(stop->detail, Catch::Contains("did not answer within 0.5 s (Connection refused)"));
  CHECK_THAT(member.agent().waiting_for(), Catch::Contains("the agent of rank 0's server at 127.0.0.1:"));
}

TEST_CASE("on success every agent returns once all servers are done, with no stop", "[peers]") {
  const int port = find_free_port();
  TestAgent hub(config_for(0, port, 2));
  TestAgent b(config_for(1, port, 2));
  REQUIRE(hub.wait_notice("are connected"));
  hub.agent().finish(true);
  CHECK_FALSE(hub.wait_returned(300ms));  // waits for server 2
  CHECK(hub.agent().waiting_for() == "server 10.0.0.12 (running)");
  b.agent().finish(true);
  CHECK(b.wait_returned());
  CHECK(hub.wait_returned());
  CHECK(hub.stop_count() == 0);
  CHECK(b.stop_count() == 0);
  CHECK_FALSE(hub.agent().stop_event());
}

TEST_CASE("the hub stops a job whose every server is silent for the stall timeout", "[peers]") {
  const int port = find_free_port();
  std::atomic<std::uint64_t> hub_silence{0};
  std::atomic<std::uint64_t> member_silence{0};
  PeerConfig hub_config = config_for(0, port, 2);
  hub_config.stall_timeout = 1000ms;
  hub_config.heartbeat_interval = 50ms;
  PeerConfig member_config = config_for(1, port, 2);
  member_config.heartbeat_interval = 50ms;
  TestAgent hub(hub_config, [&] { return hub_silence.load(); });
  TestAgent b(member_config, [&] { return member_silence.load(); });
  REQUIRE(hub.wait_notice("are connected"));
  hub_silence = 5000;  // the hub's server is silent, the member's is not
  CHECK_FALSE(hub.wait_stop(400ms));
  member_silence = 2000;
  for (TestAgent* agent : {&hub, &b}) {
    const auto stop = agent->wait_stop();
    REQUIRE(stop);
    CHECK(stop->kind == PeerEventKind::stalled);
    CHECK_THAT(stop->detail, Catch::Contains("no rank of the job wrote any output for 2.0 s"));
  }
}

TEST_CASE("the hub's port taken is a ConfigError naming it", "[peers]") {
  const int port = find_free_port();
  const UniqueFd holder = listen_on("127.0.0.1", port);
  PeerConfig config = config_for(0, port, 2);
  CHECK_THROWS_WITH(PeerAgent(config, {}, {}, {}),
                    Catch::Contains("port " + std::to_string(port) + " is already in use") &&
                        Catch::Contains("DAVINCIRUN_PEER_PORT"));
}

TEST_CASE("a failure before the agents met still reaches every server at once", "[peers]") {
  const int port = find_free_port();
  SECTION("a member fails before the hub is up: it tells the hub once it can") {
    TestAgent member(config_for(1, port, 2));
    member.agent().report(failure_on("10.0.0.12", 1));
    member.agent().finish(false);
    std::this_thread::sleep_for(300ms);
    CHECK_FALSE(member.wait_returned(10ms));  // still trying to tell someone
    TestAgent hub(config_for(0, port, 2));
    const auto stop = hub.wait_stop();
    REQUIRE(stop);
    CHECK(stop->server_id == "10.0.0.12");
    CHECK(member.wait_returned());
  }
  SECTION("the hub fails before a member joined: the member learns it on joining") {
    TestAgent hub(config_for(0, port, 2));
    hub.agent().report(failure_on("10.0.0.11", 0));
    hub.agent().finish(false);
    std::this_thread::sleep_for(300ms);
    CHECK_FALSE(hub.wait_returned(10ms));  // waits for the member, up to the peer timeout
    TestAgent member(config_for(1, port, 2));
    const auto stop = member.wait_stop();
    REQUIRE(stop);
    CHECK(stop->server_id == "10.0.0.11");
    CHECK(stop->rank == 0);
    CHECK(hub.wait_returned());
  }
}

TEST_CASE("a hub whose member never connects stops at the connect timeout and does not wait longer", "[peers]") {
  PeerConfig config = config_for(0, find_free_port(), 2);
  config.connect_timeout = 500ms;
  config.peer_timeout = 10'000ms;  // longer than the test may take
  TestAgent hub(config);
  CHECK(hub.agent().waiting_for() == "server 10.0.0.12 (not joined) (giving up 0.5 s after the start)");
  const auto stop = hub.wait_stop();
  REQUIRE(stop);
  CHECK(stop->kind == PeerEventKind::never_joined);
  CHECK(stop->server_id == "10.0.0.12");
  CHECK_THAT(stop->detail, Catch::Contains("never joined: its agent did not connect within 0.5 s"));
  hub.agent().finish(false);
  CHECK(hub.wait_returned(1000ms));  // not after the 10 s peer timeout
}

TEST_CASE("the same server started twice: the second is told why and gives up, the hub says so once", "[peers]") {
  const int port = find_free_port();
  TestAgent hub(config_for(0, port, 3));
  TestAgent first(config_for(1, port, 3));
  REQUIRE(first.wait_notice("joined the agents of the job"));
  TestAgent twin(config_for(1, port, 3));
  const auto stop = twin.wait_stop();
  REQUIRE(stop);
  CHECK(stop->kind == PeerEventKind::unreachable);
  CHECK_THAT(stop->detail, Catch::Contains("refused this server: server 10.0.0.12 has joined already"));
  CHECK(hub.wait_notice("has joined already"));
  std::this_thread::sleep_for(500ms);
  const std::string notices = hub.notices();
  std::size_t lines = 0;
  for (std::size_t at = notices.find("has joined already"); at != std::string::npos;
       at = notices.find("has joined already", at + 1)) {
    ++lines;
  }
  CHECK(lines == 1);
  CHECK(hub.stop_count() == 0);  // the job itself goes on
  CHECK(first.stop_count() == 0);
}
