// The socket interface of a multi-server job: which interface the address
// that identifies this machine is on, the variables it fills in each rank's
// environment (only where the user set none), and the job-wide values every
// server derives alike (JOB_ID, MASTER_PORT).
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "davincirun/environment.hpp"
#include "davincirun/plan.hpp"
#include "davincirun/rank_table.hpp"
#include "davincirun/server_identity.hpp"
#include "davincirun/socket_interface.hpp"
#include "test_support.hpp"

using namespace davincirun;
using namespace davincirun_test;

namespace {

// 10.0.0.12 on eth1, 172.16.0.3 on a pod's veth, loopback on lo.
MachineIdentity machine() {
  MachineIdentity m;
  m.addresses = {"127.0.0.1", "10.0.0.12", "172.16.0.3", "fe80::1"};
  m.host_name = "node-b";
  m.interfaces = {{"127.0.0.1", "lo"}, {"10.0.0.12", "eth1"}, {"172.16.0.3", "veth0"}, {"fe80::1", "eth1"}};
  return m;
}

RankTableServer server(std::string id, std::optional<std::string> host_ip = std::nullopt,
                       std::optional<std::string> container_ip = std::nullopt) {
  RankTableServer s;
  s.server_id = std::move(id);
  s.host_ip = std::move(host_ip);
  s.container_ip = std::move(container_ip);
  return s;
}

const RankTable two = parse_rank_table(R"({"version": "1.0", "server_list": [
  {"server_id": "10.0.0.11", "device": [{"device_id": "0", "device_ip": "192.1.0.1", "rank_id": "0"}]},
  {"server_id": "10.0.0.12", "device": [{"device_id": "0", "device_ip": "192.1.0.2", "rank_id": "1"}]}]})",
                                       "two.json");

}  // namespace

TEST_CASE("the interface is the one holding the address this machine was identified by", "[socket_interface]") {
  const LocalServer local = find_local_server(two, Environment(), machine(), std::nullopt);
  REQUIRE(local.index == 1);
  CHECK(local.local_address == "10.0.0.12");
  const auto interface = socket_interface(local.server, local.local_address, machine());
  REQUIRE(interface);
  CHECK(interface->name == "eth1");
  CHECK(interface->address == "10.0.0.12");
  CHECK(interface->reason == "10.0.0.12 is an address of eth1");
}

TEST_CASE("found otherwise, the server's own addresses are looked for here", "[socket_interface]") {
  // By a variable (MA_CURRENT_HOST_IP), explicitly, or by an engine index:
  // the server's server_id is still an address of this machine.
  const LocalServer by_variable = find_local_server(two, Environment({"MA_CURRENT_HOST_IP=10.0.0.12"}), machine(), {});
  CHECK(by_variable.local_address.empty());
  const auto interface = socket_interface(by_variable.server, by_variable.local_address, machine());
  REQUIRE(interface);
  CHECK(interface->name == "eth1");
  CHECK(interface->reason == "server_id 10.0.0.12 is an address of eth1");

  // container_ip first: a pod reaches its peers on its own address.
  const auto pod = socket_interface(server("pod-b", "10.0.0.12", "172.16.0.3"), "", machine());
  REQUIRE(pod);
  CHECK(pod->name == "veth0");
  CHECK(pod->reason == "container_ip 172.16.0.3 is an address of veth0");
  const auto host = socket_interface(server("node-b", "10.0.0.12"), "", machine());
  REQUIRE(host);
  CHECK(host->reason == "host_ip 10.0.0.12 is an address of eth1");
  // Compared as addresses: the machine's own spelling is what the ranks get.
  const auto v6 = socket_interface(server("FE80:0::1%eth1"), "", machine());
  REQUIRE(v6);
  CHECK(v6->address == "fe80::1");
}

TEST_CASE("no interface when the table does not say where this machine is reached", "[socket_interface]") {
  // A container whose table names the node's address, or a server known by name only.
  CHECK_FALSE(socket_interface(server("pod-x", "10.0.0.99", "172.16.0.99"), "", machine()));
  CHECK_FALSE(socket_interface(server("node-b"), "", machine()));
  // An address without a known interface (a hand-built machine).
  MachineIdentity bare = machine();
  bare.interfaces.clear();
  CHECK_FALSE(socket_interface(server("10.0.0.12"), "10.0.0.12", bare));
}

TEST_CASE("MachineIdentity::current() names the interface of each address", "[socket_interface]") {
  const MachineIdentity me = MachineIdentity::current();
  REQUIRE(me.interfaces.count("127.0.0.1") == 1);
  CHECK(me.interfaces.at("127.0.0.1") == "lo");
  for (const auto& [address, name] : me.interfaces) CHECK_FALSE(name.empty());
}

namespace {

JobEnvironment interface_job() {
  JobEnvironment job;
  job.rank_table_file = "/run/t.json";
  job.world_size = 2;
  job.local_world_size = 1;
  job.job_id = "job-1";
  job.master_addr = "10.0.0.11";
  job.master_port = 21000;
  job.socket_interface = "eth1";
  job.socket_address = "10.0.0.12";
  return job;
}

std::map<std::string, std::optional<std::string>> socket_variables(
    const Environment& inherited, const std::vector<std::pair<std::string, std::string>>& extra = {}) {
  RankAssignment rank;
  rank.rank = 1;
  const Environment env = rank_environment(inherited, interface_job(), rank, extra);
  std::map<std::string, std::optional<std::string>> out;
  for (const char* name : {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME", "HCCL_IF_IP"}) {
    out[name] = env.get(name);
  }
  return out;
}

}  // namespace

TEST_CASE("each rank gets the interface in every framework's variable", "[socket_interface]") {
  const auto vars = socket_variables(Environment());
  CHECK(vars.at("GLOO_SOCKET_IFNAME") == "eth1");
  CHECK(vars.at("NCCL_SOCKET_IFNAME") == "=eth1");  // exactly eth1, not every name starting so
  CHECK(vars.at("HCCL_SOCKET_IFNAME") == "=eth1");
  CHECK(vars.at("HCCL_IF_IP") == "10.0.0.12");

  JobEnvironment none = interface_job();
  none.socket_interface.clear();
  none.socket_address.clear();
  const Environment env = rank_environment(Environment(), none, RankAssignment{});
  for (const char* name : {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME", "HCCL_IF_IP"}) {
    CHECK_FALSE(env.get(name));
  }
}

TEST_CASE("a socket variable the user set is kept, inherited or given", "[socket_interface]") {
  const auto inherited = socket_variables(Environment({"GLOO_SOCKET_IFNAME=ib0", "NCCL_SOCKET_IFNAME="}));
  CHECK(inherited.at("GLOO_SOCKET_IFNAME") == "ib0");
  CHECK(inherited.at("NCCL_SOCKET_IFNAME") == "");  // even empty
  CHECK(inherited.at("HCCL_IF_IP") == "10.0.0.12");
  const auto given = socket_variables(Environment(), {{"NCCL_SOCKET_IFNAME", "^docker"}});
  CHECK(given.at("NCCL_SOCKET_IFNAME") == "^docker");
  CHECK(given.at("GLOO_SOCKET_IFNAME") == "eth1");

  // HCCL_IF_IP wins over HCCL_SOCKET_IFNAME in HCCL: the user's choice of
  // either leaves both alone.
  const auto hccl_name = socket_variables(Environment({"HCCL_SOCKET_IFNAME=enp"}));
  CHECK(hccl_name.at("HCCL_SOCKET_IFNAME") == "enp");
  CHECK_FALSE(hccl_name.at("HCCL_IF_IP"));
  const auto hccl_ip = socket_variables(Environment(), {{"HCCL_IF_IP", "10.1.1.1"}});
  CHECK(hccl_ip.at("HCCL_IF_IP") == "10.1.1.1");
  CHECK_FALSE(hccl_ip.at("HCCL_SOCKET_IFNAME"));
}

namespace {

// The plan each launcher of a job makes: `server_id` says which server (the
// rules are tested above), the environment is the platform's.
LaunchPlan plan_as(const std::string& table_path, const std::string& server_id, const Environment& env) {
  LaunchOptions options;
  options.command = {"true"};
  options.rank_table = table_path;
  options.wait_timeout = std::chrono::milliseconds(0);
  options.server_id = server_id;
  return plan_launch(options, env);
}

}  // namespace

TEST_CASE("every server of a job derives the same JOB_ID and MASTER_PORT", "[socket_interface]") {
  TempDir tmp;
  write_file(tmp / "two.json", R"({"version": "1.0", "server_count": "2", "status": "completed", "server_list": [
    {"server_id": "10.77.1.11", "device": [{"device_id": "0", "device_ip": "192.1.0.1", "rank_id": "0"}]},
    {"server_id": "10.77.1.12", "device": [{"device_id": "0", "device_ip": "192.1.0.2", "rank_id": "1"}]}]})");
  for (const auto& env : {Environment(), Environment({"BATCH_JOB_ID=b-7"}), Environment({"MA_VJ_NAME=ma-job-x"})}) {
    const LaunchPlan first = plan_as(tmp / "two.json", "10.77.1.11", env);
    const LaunchPlan second = plan_as(tmp / "two.json", "10.77.1.12", env);
    CHECK(first.job.job_id == second.job.job_id);
    CHECK(first.job.master_port == second.job.master_port);
    CHECK(first.job.master_addr == "10.77.1.11");
    CHECK(second.job.master_addr == "10.77.1.11");
    CHECK(first.job.master_port >= first_derived_port);
  }
  // Another platform job id: another port, but for a 1-in-12,000 chance.
  CHECK(plan_as(tmp / "two.json", "10.77.1.12", Environment({"BATCH_JOB_ID=b-7"})).job.job_id == "b-7");
  CHECK(plan_as(tmp / "two.json", "10.77.1.12", Environment({"MA_VJ_NAME=ma-job-x"})).job.job_id == "modelarts-job-x");
}

TEST_CASE("pods sharing a server each derive the job's JOB_ID and MASTER_PORT", "[socket_interface]") {
  // A 0.1 table whose two pods share one host: one server, two launchers.
  TempDir tmp;
  write_file(tmp / "pods.json", R"({"status": "completed", "group_count": "1", "group_list": [{"group_name": "g",
    "device_count": "2", "instance_count": "2", "instance_list": [
    {"pod_name": "job-demo-0", "server_id": "10.77.1.21", "devices": [{"device_id": "0", "device_ip": "192.1.0.1"}]},
    {"pod_name": "job-demo-1", "server_id": "10.77.1.21", "devices": [{"device_id": "1", "device_ip": "192.1.0.2"}]}
    ]}]})");
  const LaunchPlan pod0 =
      plan_as(tmp / "pods.json", "10.77.1.21", Environment({"MA_CURRENT_INSTANCE_NAME=job-demo-0"}));
  const LaunchPlan pod1 =
      plan_as(tmp / "pods.json", "10.77.1.21", Environment({"MA_CURRENT_INSTANCE_NAME=job-demo-1"}));
  REQUIRE(pod0.ranks.size() == 1);
  CHECK(pod1.ranks.front().rank == 1);
  CHECK(pod0.job.job_id == pod1.job.job_id);
  CHECK(pod0.job.master_port == pod1.job.master_port);
  CHECK(pod0.job.master_port >= first_derived_port);  // derived, not a free port of one pod
  CHECK(pod0.job.socket_interface.empty());           // one server: loopback serves
}
