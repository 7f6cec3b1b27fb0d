// Server identity: each rule of identify_server() with a fake machine and
// environment, their precedence, and the errors for ambiguity and no match.
#include <catch2/catch.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "davincirun/errors.hpp"
#include "davincirun/rank_table.hpp"
#include "davincirun/server_identity.hpp"

using namespace davincirun;
using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;

namespace {

struct Server {
  std::string server_id;
  std::optional<std::string> host_ip;
  std::optional<std::string> container_ip;
};

// A format 1.0 table with one device per server, in rank order.
RankTable table_of(const std::vector<Server>& servers) {
  std::string list;
  for (std::size_t i = 0; i < servers.size(); ++i) {
    const Server& s = servers[i];
    list += std::string(list.empty() ? "" : ",") + R"({"server_id": ")" + s.server_id + "\"";
    if (s.host_ip) list += R"(, "host_ip": ")" + *s.host_ip + "\"";
    if (s.container_ip) list += R"(, "container_ip": ")" + *s.container_ip + "\"";
    list += R"(, "device": [{"device_id": "0", "rank_id": ")" + std::to_string(i) + R"(", "device_ip": "192.168.1.)" +
            std::to_string(i + 1) + "\"}]}";
  }
  return parse_rank_table(R"({"version": "1.0", "server_list": [)" + list + "]}", "test.json");
}

// A format 1.0 table of servers known only by their server_id.
RankTable table_of_ids(const std::vector<std::string>& ids) {
  std::vector<Server> servers;
  for (const auto& id : ids) servers.push_back({id, std::nullopt, std::nullopt});
  return table_of(servers);
}

const RankTable two = table_of_ids({"10.0.0.11", "10.0.0.12"});

// Kubernetes-operator style: opaque server ids, host and container addresses.
const RankTable operator_table = table_of({{"pod-a", std::string("10.0.0.1"), std::string("172.16.0.1")},
                                           {"pod-b", std::string("10.0.0.2"), std::string("172.16.0.2")},
                                           {"pod-c", std::string("10.0.0.2"), std::string("172.16.0.3")}});

// A 0.1 table: pods 0 and 1 share the host 10.0.0.1 (merged into one server).
const RankTable pods_table = parse_rank_table(R"({"group_count": "1", "group_list": [{"group_name": "g",
  "device_count": "3", "instance_count": "3", "instance_list": [
  {"pod_name": "job-demo-2", "server_id": "10.0.0.2", "devices": [{"device_id": "0", "device_ip": "192.1.0.3"}]},
  {"pod_name": "job-demo-1", "server_id": "10.0.0.1", "devices": [{"device_id": "1", "device_ip": "192.1.0.2"}]},
  {"pod_name": "job-demo-0", "server_id": "10.0.0.1", "devices": [{"device_id": "0", "device_ip": "192.1.0.1"}]}]}]})",
                                              "pods.json");

// A machine with these addresses (no interface names) and host name.
MachineIdentity at(std::vector<std::string> addresses, std::string host_name) {
  MachineIdentity machine;
  machine.addresses = std::move(addresses);
  machine.host_name = std::move(host_name);
  return machine;
}

const MachineIdentity nowhere = at({"127.0.0.1", "::1", "10.9.9.9"}, "vm");

std::string id_of(const RankTable& table, const Environment& env, const MachineIdentity& machine,
                  const std::optional<std::string>& explicit_id = std::nullopt) {
  return table.servers[identify_server(table, env, machine, explicit_id).index].server_id;
}

}  // namespace

TEST_CASE("an explicit server id must name a server exactly", "[server_identity]") {
  const ServerMatch m = identify_server(two, Environment(), nowhere, std::string("10.0.0.12"));
  CHECK(m.index == 1);
  CHECK_THAT(m.reason, Contains("given explicitly"));
  // Exact text: an equal address written differently is not the server id.
  CHECK_THROWS_WITH(identify_server(two, Environment(), nowhere, std::string("10.0.0.012")),
                    Contains("'10.0.0.012' is not in the rank table") && Contains("10.0.0.11, 10.0.0.12"));
  CHECK_THROWS_AS(identify_server(two, Environment(), nowhere, std::string("x")), ConfigError);
}

TEST_CASE("a server id not in a table of many servers: the first 16 named, the nearest suggested",
          "[server_identity]") {
  RankTable many;
  for (int i = 0; i < 4096; ++i) {
    RankTableServer server;
    server.server_id = fmt::format("10.0.{}.{}", i / 256, i % 256);
    many.servers.push_back(server);
  }
  try {
    identify_server(many, Environment(), nowhere, std::string("10.0.15.2555"));
    FAIL("no error");
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Contains("(servers: 10.0.0.0, 10.0.0.1, ") && Contains(", 10.0.0.15 and 4080 more)") &&
                         Contains("did you mean '10.0.15.255'?"));
    CHECK(what.find("10.0.0.16") == std::string::npos);
    CHECK(what.size() < 400);
  }
  // Nothing near: no suggestion.
  CHECK_THROWS_WITH(identify_server(many, Environment(), nowhere, std::string("gpu-node-7")),
                    !Contains("did you mean"));
}

TEST_CASE("pod name finds the server in a 0.1 table", "[server_identity]") {
  const RankTable table =
      load_rank_table(std::string(DAVINCIRUN_TEST_DATA) + "/rank_tables/valid/v0_two_pods_out_of_order.json");
  CHECK(id_of(table, Environment({"MA_CURRENT_INSTANCE_NAME=job0a1b2c3d-job-demo-1"}), nowhere) == "10.0.0.22");
  CHECK(id_of(table, Environment({"MA_CURRENT_INSTANCE_NAME=job0a1b2c3d-job-demo-0"}), nowhere) == "10.0.0.21");
  CHECK(id_of(table, Environment({"BATCH_TASK_CURRENT_INSTANCE=job0a1b2c3d-job-demo-1"}), nowhere) == "10.0.0.22");
  // MA_CURRENT_INSTANCE_NAME wins: the launcher narrows devices by the same variable.
  CHECK(id_of(table,
              Environment({"MA_CURRENT_INSTANCE_NAME=job0a1b2c3d-job-demo-0",
                           "BATCH_TASK_CURRENT_INSTANCE=job0a1b2c3d-job-demo-1"}),
              nowhere) == "10.0.0.21");

  // Two pods of one host: either pod name finds the merged server.
  REQUIRE(pods_table.servers.size() == 2);
  const ServerMatch m = identify_server(pods_table, Environment({"MA_CURRENT_INSTANCE_NAME=job-demo-1"}), nowhere, {});
  CHECK(pods_table.servers[m.index].server_id == "10.0.0.1");
  CHECK(m.reason == "pod_name job-demo-1 matches MA_CURRENT_INSTANCE_NAME");
  CHECK(id_of(pods_table, Environment({"MA_CURRENT_INSTANCE_NAME=job-demo-2"}), nowhere) == "10.0.0.2");
}

TEST_CASE("container_ip matches POD_IP, MA_CURRENT_IP or an interface address", "[server_identity]") {
  CHECK(id_of(operator_table, Environment({"POD_IP=172.16.0.2"}), nowhere) == "pod-b");
  CHECK(id_of(operator_table, Environment({"MA_CURRENT_IP=172.16.0.3"}), nowhere) == "pod-c");
  const MachineIdentity in_pod_c = at({"127.0.0.1", "172.16.0.3"}, "pod-c-host");
  const ServerMatch m = identify_server(operator_table, Environment(), in_pod_c, {});
  CHECK(m.index == 2);
  CHECK(m.reason == "container_ip 172.16.0.3 matches an address of this machine");
}

TEST_CASE("host_ip or server_id matches MA_CURRENT_HOST_IP or XDL_IP", "[server_identity]") {
  const ServerMatch m = identify_server(operator_table, Environment({"MA_CURRENT_HOST_IP=10.0.0.1"}), nowhere, {});
  CHECK(m.index == 0);
  CHECK(m.reason == "host_ip 10.0.0.1 matches MA_CURRENT_HOST_IP");
  CHECK(id_of(two, Environment({"XDL_IP=10.0.0.12"}), nowhere) == "10.0.0.12");
  CHECK(id_of(two, Environment({"MA_CURRENT_HOST_IP=10.0.0.11"}), nowhere) == "10.0.0.11");
  // Empty values count as unset.
  CHECK_THROWS_AS(identify_server(two, Environment({"XDL_IP="}), nowhere, {}), ConfigError);
}

TEST_CASE("server_id matches an interface address, compared as an address", "[server_identity]") {
  const ServerMatch m = identify_server(two, Environment(), at({"127.0.0.1", "10.0.0.12"}, "vm"), {});
  CHECK(m.index == 1);
  CHECK(m.reason == "server_id 10.0.0.12 matches an address of this machine");

  const RankTable v6 = table_of_ids({"fd00:0:0::11", "FD00::12"});
  CHECK(id_of(v6, Environment(), at({"::1", "fd00::11"}, "vm")) == "fd00:0:0::11");
  CHECK(id_of(v6, Environment(), at({"fd00:0::0:12"}, "vm")) == "FD00::12");
  // A zone suffix is ignored; an IPv4-mapped address is its IPv4 address.
  const RankTable zoned = table_of_ids({"fe80::1%eth0", "::ffff:10.0.0.2"});
  CHECK(id_of(zoned, Environment(), at({"fe80::1"}, "vm")) == "fe80::1%eth0");
  CHECK(id_of(zoned, Environment(), at({"10.0.0.2"}, "vm")) == "::ffff:10.0.0.2");
  // No prefix matching: 10.0.0.1 is not 10.0.0.11.
  CHECK_THROWS_AS(identify_server(two, Environment(), at({"10.0.0.1"}, "vm"), {}), ConfigError);
}

TEST_CASE("server_id matches the host name, or its short name", "[server_identity]") {
  const RankTable names = table_of_ids({"node-a", "node-b.cluster.local"});
  const ServerMatch m = identify_server(names, Environment(), at({"127.0.0.1"}, "node-a.cluster.local"), {});
  CHECK(m.index == 0);
  CHECK(m.reason == "server_id node-a matches this machine's host name 'node-a.cluster.local'");
  CHECK(id_of(names, Environment(), at({}, "node-a")) == "node-a");
  CHECK(id_of(names, Environment(), at({}, "node-b.cluster.local")) == "node-b.cluster.local");
  CHECK(id_of(names, Environment(), at({}, "node-b")) == "node-b.cluster.local");
  // Another domain, or a longer name, is another machine.
  CHECK_THROWS_AS(identify_server(names, Environment(), at({}, "node-b.other"), {}), ConfigError);
  CHECK_THROWS_AS(identify_server(names, Environment(), at({}, "node-ab"), {}), ConfigError);
}

TEST_CASE("a one-server table is this machine when no rule matches", "[server_identity]") {
  const RankTable one = table_of_ids({"elsewhere"});
  const ServerMatch m = identify_server(one, Environment(), MachineIdentity{}, {});
  CHECK(m.index == 0);
  CHECK(m.reason == "the rank table has one server");
  // ... but an explicit id must still name it.
  CHECK_THROWS_AS(identify_server(one, Environment(), MachineIdentity{}, std::string("other")), ConfigError);
}

TEST_CASE("several servers matching one rule is an error naming them", "[server_identity]") {
  CHECK_THROWS_WITH(identify_server(operator_table, Environment({"MA_CURRENT_HOST_IP=10.0.0.2"}), nowhere, {}),
                    Contains("matches 2 servers of the rank table by host_ip/server_id") &&
                        Contains("pod-b (host_ip 10.0.0.2 matches MA_CURRENT_HOST_IP)") &&
                        Contains("pod-c (host_ip 10.0.0.2 matches MA_CURRENT_HOST_IP)") &&
                        EndsWith("say which one it is with server_id"));
  CHECK_THROWS_WITH(identify_server(two, Environment(), at({"10.0.0.12", "10.0.0.11"}, "vm"), {}),
                    Contains("by server_id: 10.0.0.11 (server_id 10.0.0.11 matches an address of this machine), "
                             "10.0.0.12 (server_id 10.0.0.12 matches an address of this machine)"));
}

TEST_CASE("no match on a multi-server table lists what was tried", "[server_identity]") {
  try {
    identify_server(two, Environment({"XDL_IP=10.7.7.7"}), nowhere, {});
    FAIL("no error");
  } catch (const OptionError& e) {
    const std::string what = e.what();
    CHECK(e.option() == "server_id");
    CHECK_THAT(e.message_naming("--server-id"), EndsWith("say which one it is with --server-id"));
    CHECK_THAT(what, Contains("which of the 2 servers of the rank table (10.0.0.11, 10.0.0.12)"));
    CHECK_THAT(what, Contains("pod_name: MA_CURRENT_INSTANCE_NAME not set; BATCH_TASK_CURRENT_INSTANCE not set; "
                              "no server has a pod_name"));
    CHECK_THAT(what, Contains("container_ip: POD_IP not set; MA_CURRENT_IP not set; "
                              "interface addresses 127.0.0.1, ::1, 10.9.9.9; no server has a container_ip"));
    CHECK_THAT(what, Contains("host_ip/server_id: MA_CURRENT_HOST_IP not set; XDL_IP '10.7.7.7'"));
    CHECK_THAT(what, Contains("server_id: interface addresses 127.0.0.1, ::1, 10.9.9.9; host name 'vm'"));
    CHECK_THAT(what, EndsWith("say which one it is with server_id"));
  }
  CHECK_THROWS_WITH(identify_server(two, Environment(), MachineIdentity{}, {}),
                    Contains("no interface addresses") && Contains("host name unknown"));
}

TEST_CASE("an earlier rule wins over a later one", "[server_identity]") {
  // Every rule below points at another server; the earliest one decides.
  const MachineIdentity machine = at({"172.16.0.3"}, "pod-b");
  const Environment env({"MA_CURRENT_HOST_IP=10.0.0.1", "POD_IP=172.16.0.2"});
  CHECK(id_of(operator_table, env, machine, std::string("pod-a")) == "pod-a");  // explicit
  // POD_IP and the interface address both belong to rule 3: two servers, an error.
  CHECK_THROWS_WITH(identify_server(operator_table, env, machine, {}), Contains("by container_ip"));
  CHECK(id_of(operator_table, Environment({"MA_CURRENT_HOST_IP=10.0.0.1"}), machine) == "pod-c");  // 3 over 4, 5
  CHECK(id_of(operator_table, Environment({"MA_CURRENT_HOST_IP=10.0.0.1"}), at({}, "pod-b")) == "pod-a");  // 4 over 5
  // A later rule that would be ambiguous is never reached.
  CHECK(id_of(two, Environment({"XDL_IP=10.0.0.11"}), at({"10.0.0.11", "10.0.0.12"}, "vm")) == "10.0.0.11");
  // Pod name (2) over an interface address (5).
  CHECK(id_of(pods_table, Environment({"MA_CURRENT_INSTANCE_NAME=job-demo-2"}), at({"10.0.0.1"}, "vm")) == "10.0.0.2");
}

TEST_CASE("MachineIdentity::current() sees loopback and a host name", "[server_identity]") {
  const MachineIdentity me = MachineIdentity::current();
  CHECK(std::find(me.addresses.begin(), me.addresses.end(), "127.0.0.1") != me.addresses.end());
  CHECK_FALSE(me.host_name.empty());
}
