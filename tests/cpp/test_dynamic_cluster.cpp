// MindSpore's dynamic-cluster mode in the plan: derived ports and job ids,
// taken ports, the tables a plan makes itself (--nproc, --devices), and the
// scheduler in results. (The variables of its roles: test_environment.cpp.)
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>
#include <string>

#include "davincirun/environment.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/failure_report.hpp"
#include "davincirun/plan.hpp"
#include "job/job_protocol.hpp"
#include "plan/plan_tables.hpp"

using namespace davincirun;

namespace {

std::string two_server_table() {
  return R"({"version": "1.0", "server_count": "2", "status": "completed", "server_list": [
    {"server_id": "10.0.0.1", "device": [{"device_id": "0", "device_ip": "192.1.0.1", "rank_id": "0"}]},
    {"server_id": "10.0.0.2", "device": [{"device_id": "0", "device_ip": "192.1.0.2", "rank_id": "1"}]}]})";
}

}  // namespace

TEST_CASE("derived ports are the same for the same table and job, and stay below the ephemeral range",
          "[dynamic_cluster]") {
  const std::string table = two_server_table();
  const int port = derived_port(table, "job-1", "MASTER_PORT");
  CHECK(port == derived_port(table, "job-1", "MASTER_PORT"));
  std::set<int> ports;
  for (int i = 0; i < 200; ++i) {
    const int p = derived_port(table, "job-" + std::to_string(i), "MS_SCHED_PORT");
    CHECK(p >= first_derived_port);
    CHECK(p <= last_derived_port);
    ports.insert(p);
  }
  CHECK(ports.size() > 190);  // other jobs, other ports (a few collisions among 200 are expected)
  CHECK(derived_port(table, "job-1", "MASTER_PORT") != derived_port(table, "job-1", "MS_SCHED_PORT"));
  CHECK(derived_port(table, "ab", "c") != derived_port(table, "a", "bc"));
}

TEST_CASE("a multi-server job id comes from the table when the platform gives none", "[dynamic_cluster]") {
  const std::string table = two_server_table();
  const std::string id = resolve_job_id(Environment({"PATH=/bin"}), table);
  CHECK(id == resolve_job_id(Environment(), table));
  CHECK(id.rfind("job-", 0) == 0);
  CHECK(id.size() == 12);
  CHECK(id != resolve_job_id(Environment(), table + " "));
  CHECK(resolve_job_id(Environment({"BATCH_JOB_ID=b-1"}), table) == "b-1");  // the platform's id wins
}

TEST_CASE("a port something listens on is refused by name, a free one passes", "[dynamic_cluster]") {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(fd, 1) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  const int port = ntohs(addr.sin_port);
  try {
    check_port_free(port, "MASTER_PORT", "rank 0 listens on it");
    FAIL("a port in use was accepted");
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    CHECK(what.find("MASTER_PORT " + std::to_string(port) + " is already in use on this machine") != std::string::npos);
    CHECK(what.find("set MASTER_PORT to a free port") != std::string::npos);
  }
  ::close(fd);
  CHECK_NOTHROW(check_port_free(port, "MASTER_PORT", "rank 0 listens on it"));
}

TEST_CASE("a plan's own one-server table and a table narrowed to some devices", "[dynamic_cluster]") {
  const RankTable own = detail::one_server_table({4, 6}, "(this machine)");
  REQUIRE(own.servers.size() == 1);
  CHECK(own.world_size == 2);
  CHECK(own.servers[0].devices[0].device_id == 4);
  CHECK(own.servers[0].devices[1].rank_id == 1);

  const RankTable four = parse_rank_table(R"({"version": "1.0", "server_count": "1", "status": "completed",
    "server_list": [{"server_id": "10.0.0.1", "host_nic_ip": "reserve", "device": [
      {"device_id": "0", "rank_id": "0"}, {"device_id": "1", "rank_id": "1"},
      {"device_id": "2", "rank_id": "2"}, {"device_id": "3", "rank_id": "3"}]}]})",
                                          "t.json");
  const RankTable narrowed = detail::narrowed_table(four, {3, 1}, "t.json (devices 3,1)");
  REQUIRE(narrowed.servers[0].devices.size() == 2);
  CHECK(narrowed.world_size == 2);
  // The table's order, not the option's, numbers the ranks.
  CHECK(narrowed.servers[0].devices[0].device_id == 1);
  CHECK(narrowed.servers[0].devices[0].rank_id == 0);
  CHECK(narrowed.servers[0].devices[1].device_id == 3);
  CHECK(narrowed.servers[0].devices[1].rank_id == 1);
  CHECK(narrowed.normalized_json.find("host_nic_ip") != std::string::npos);  // the platform's fields stay

  CHECK_THROWS_WITH(detail::narrowed_table(four, {5}, "t"),
                    Catch::Contains("device 5 is not in the rank table, whose server lists devices 0,1,2,3"));
  const RankTable two = parse_rank_table(two_server_table(), "two.json");
  CHECK_THROWS_WITH(detail::narrowed_table(two, {0}, "t"), Catch::Contains("this one lists 2 servers"));
}

TEST_CASE("launch options: the launch mode's spelling, nproc and devices rules", "[dynamic_cluster]") {
  CHECK(parse_launch_mode("dynamic-cluster") == LaunchMode::dynamic_cluster);
  CHECK(parse_launch_mode("rank-table") == LaunchMode::rank_table);
  CHECK(std::string(to_string(LaunchMode::dynamic_cluster)) == "dynamic-cluster");
  CHECK_THROWS_WITH(parse_launch_mode("msrun"),
                    Catch::Contains("launch_mode must be rank-table, dynamic-cluster, tf-config or cm, got 'msrun'"));
  LaunchOptions o;
  o.command = {"true"};
  o.nproc = 0;
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("nproc must be a number of ranks between 1 and 1024, got 0"));
  o.nproc = 2;
  o.rank_table = "t.json";
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("a rank table was given too: give one or the other"));
  o.rank_table.clear();
  o.devices = std::vector<int>{0, 0};
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("device 0 is named twice"));
  o.devices = std::vector<int>{0, 1, 2};
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("nproc 2 does not match the 3 devices given"));
  o.devices = std::vector<int>{};
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("devices is empty"));
  o.devices = std::vector<int>{1, 0};
  CHECK_NOTHROW(o.validate());
}

TEST_CASE("the scheduler is named as such in results, their wire form and the failure report", "[dynamic_cluster]") {
  JobResult result;
  RankResult worker;
  worker.rank = 0;
  worker.pid = 100;
  worker.status = ExitStatus{ExitStatus::Kind::signaled, 15};
  worker.terminated_by_launcher = true;
  RankResult scheduler;
  scheduler.role = ProcessRole::scheduler;
  scheduler.rank = -1;
  scheduler.pid = 101;
  scheduler.log_path = "/nonexistent/scheduler.log";
  scheduler.status = ExitStatus{ExitStatus::Kind::exited, 1};
  result.ranks = {worker, scheduler};
  result.first_failure = 1;
  result.stop_reason = StopReason::rank_failed;

  const JobResult back = detail::decode_result(detail::encode_result(result));
  REQUIRE(back.ranks.size() == 2);
  CHECK(back.ranks[0].role == ProcessRole::rank);
  CHECK(back.ranks[1].role == ProcessRole::scheduler);
  CHECK(back.ranks[1].rank == -1);

  const std::string report = failure_report(back);
  CHECK(report.rfind("scheduler (pid 101) failed with exit code 1", 0) == 0);
  CHECK(report.find("rank 0 (pid 100): stopped by the launcher (SIGTERM)") != std::string::npos);
  CHECK(process_name(ProcessRole::scheduler, -1) == "scheduler");
  CHECK(process_name(ProcessRole::rank, 7) == "rank 7");
}
