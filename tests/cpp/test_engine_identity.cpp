// Server identity from the job engine: Slurm's node name and node id, Open
// MPI's rank, Volcano's task index (rules 5 and 6 of server_identity.hpp),
// each variable's checks, and their place among the address rules; the
// engines' task variables, which tell a task of an engine.
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "davincirun/errors.hpp"
#include "davincirun/rank_table.hpp"
#include "davincirun/server_identity.hpp"
#include "plan/job_engines.hpp"

using namespace davincirun;
using Catch::Matchers::Contains;

namespace {

// A format 1.0 table, one device per server, in rank order; `host_ips`
// (when given) one per server.
RankTable table_of(const std::vector<std::string>& ids, const std::vector<std::string>& host_ips = {}) {
  std::string list;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    list += std::string(list.empty() ? "" : ",") + R"({"server_id": ")" + ids[i] + "\"";
    if (!host_ips.empty()) list += R"(, "host_ip": ")" + host_ips[i] + "\"";
    list += R"(, "device": [{"device_id": "0", "rank_id": ")" + std::to_string(i) + R"(", "device_ip": "192.168.1.)" +
            std::to_string(i + 1) + "\"}]}";
  }
  return parse_rank_table(R"({"version": "1.0", "server_list": [)" + list + "]}", "test.json");
}

// Servers known by names that are neither this machine's addresses nor its host name.
const RankTable named = table_of({"server-a", "server-b", "server-c"});

MachineIdentity at(std::vector<std::string> addresses, std::string host_name) {
  MachineIdentity machine;
  machine.addresses = std::move(addresses);
  machine.host_name = std::move(host_name);
  return machine;
}

const MachineIdentity elsewhere = at({"127.0.0.1", "10.9.9.9"}, "vm");

ServerMatch match(const RankTable& table, const std::vector<std::string>& env,
                  const MachineIdentity& machine = elsewhere) {
  return identify_server(table, Environment(env), machine, std::nullopt);
}

std::string no_match_error(const RankTable& table, const std::vector<std::string>& env) {
  try {
    match(table, env);
  } catch (const OptionError& e) {
    return e.what();
  }
  FAIL("a server was found");
  return {};
}

}  // namespace

TEST_CASE("SLURMD_NODENAME finds a server named after the Slurm node", "[server_identity]") {
  const ServerMatch m = match(named, {"SLURMD_NODENAME=server-b"});
  CHECK(m.index == 1);
  CHECK(m.reason == "server_id server-b matches SLURMD_NODENAME");
  CHECK(m.local_address.empty());
  // As host names: either side may be the short name of the other.
  CHECK(match(table_of({"n1.cluster", "n2.cluster"}), {"SLURMD_NODENAME=n2"}).index == 1);
}

TEST_CASE("SLURM_NODEID is the server's position when no address or name matches", "[server_identity]") {
  const ServerMatch m = match(named, {"SLURM_NODEID=2", "SLURM_STEP_NUM_NODES=3", "SLURM_LOCALID=0"});
  CHECK(m.index == 2);
  CHECK(m.reason ==
        "SLURM_NODEID 2, SLURM_STEP_NUM_NODES 3 is the position of server server-c in the rank table "
        "(its servers in rank order, one agent each)");
  // Without a step (a batch script), the job's node count is checked.
  CHECK(match(named, {"SLURM_NODEID=0", "SLURM_JOB_NUM_NODES=3"}).index == 0);
  CHECK(match(named, {"SLURM_NODEID=1", "SLURM_NNODES=3"}).index == 1);
  CHECK(match(named, {"SLURM_NODEID=1"}).index == 1);  // no count: only the range is checked
}

TEST_CASE("SLURM_NODEID is refused when the step does not have one agent per server", "[server_identity]") {
  CHECK_THAT(no_match_error(named, {"SLURM_NODEID=1", "SLURM_STEP_NUM_NODES=4"}),
             Contains("SLURM_NODEID '1'; SLURM_STEP_NUM_NODES 4 is not the rank table's 3 servers"));
  // The step's count wins over the job's: srun -N2 in a 4-node allocation.
  CHECK(match(table_of({"a", "b"}), {"SLURM_NODEID=1", "SLURM_STEP_NUM_NODES=2", "SLURM_JOB_NUM_NODES=4"}).index == 1);
  CHECK_THAT(no_match_error(named, {"SLURM_NODEID=1", "SLURM_LOCALID=1"}),
             Contains("SLURM_LOCALID is 1: several agents run on this node") && Contains("srun --ntasks-per-node=1"));
  CHECK_THAT(no_match_error(named, {"SLURM_NODEID=3"}),
             Contains("SLURM_NODEID 3 is beyond the rank table's 3 servers"));
  CHECK_THAT(no_match_error(named, {"SLURM_NODEID=x1"}), Contains("SLURM_NODEID 'x1' is not a decimal number"));
  CHECK_THAT(no_match_error(named, {"SLURM_NODEID="}), Contains("SLURM_NODEID not set"));  // empty is unset
}

TEST_CASE("OMPI_COMM_WORLD_RANK is the server's position with one agent per node", "[server_identity]") {
  const ServerMatch m =
      match(named, {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=3", "OMPI_COMM_WORLD_LOCAL_SIZE=1"});
  CHECK(m.index == 1);
  CHECK_THAT(m.reason, Contains("OMPI_COMM_WORLD_RANK 1, OMPI_COMM_WORLD_SIZE 3 is the position of server server-b"));
  CHECK_THAT(no_match_error(named, {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=6"}),
             Contains("OMPI_COMM_WORLD_SIZE 6 is not the rank table's 3 servers"));
  CHECK_THAT(
      no_match_error(named, {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=3", "OMPI_COMM_WORLD_LOCAL_SIZE=2"}),
      Contains("OMPI_COMM_WORLD_LOCAL_SIZE is 2") && Contains("mpirun --map-by ppr:1:node"));
  // mpirun inside a Slurm allocation: the innermost launcher, Open MPI, decides.
  CHECK(match(named, {"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=3", "SLURM_NODEID=0"}).index == 2);
}

TEST_CASE("VC_TASK_INDEX is the server's position in a Volcano job of one task", "[server_identity]") {
  CHECK(match(named, {"VC_TASK_INDEX=2", "VK_TASK_INDEX=2", "VC_WORKER_NUM=3"}).index == 2);
  CHECK(match(named, {"VK_TASK_INDEX=1"}).index == 1);  // older Volcano sets only VK_
  CHECK_THAT(no_match_error(named, {"VC_TASK_INDEX=0", "VC_MASTER_NUM=1", "VC_WORKER_NUM=2"}),
             Contains("the Volcano job has 2 tasks (VC_MASTER_NUM, VC_WORKER_NUM)"));
  CHECK_THAT(no_match_error(named, {"VC_TASK_INDEX=0", "VC_WORKER_NUM=4"}),
             Contains("VC_WORKER_NUM 4 is not the rank table's 3 servers"));
  // Slurm inside a pod: Slurm decides.
  CHECK(match(named, {"VC_TASK_INDEX=0", "SLURM_NODEID=1"}).index == 1);
}

TEST_CASE("an address or name match wins over the engine's index", "[server_identity]") {
  const RankTable two = table_of({"10.0.0.11", "10.0.0.12"});
  const ServerMatch m = match(two, {"SLURM_NODEID=0", "OMPI_COMM_WORLD_RANK=0"}, at({"10.0.0.12"}, "vm"));
  CHECK(m.index == 1);
  CHECK(m.local_address == "10.0.0.12");
  CHECK(match(named, {"SLURMD_NODENAME=server-c", "SLURM_NODEID=0"}).index == 2);
  // An engine variable that does not fit the table is no error when an address decides.
  CHECK(match(two, {"SLURM_NODEID=5"}, at({"10.0.0.11"}, "vm")).index == 0);
}

TEST_CASE("the engine's index picks among servers that share an address", "[server_identity]") {
  // Two pods of one node: both servers carry the node's host_ip.
  const RankTable pods = table_of({"pod-a", "pod-b", "pod-c"}, {"10.0.0.1", "10.0.0.2", "10.0.0.2"});
  const ServerMatch m = match(pods, {"MA_CURRENT_HOST_IP=10.0.0.2", "VC_TASK_INDEX=2"});
  CHECK(m.index == 2);
  CHECK(m.reason ==
        "host_ip 10.0.0.2 matches MA_CURRENT_HOST_IP; 2 servers match by host_ip/server_id, and VC_TASK_INDEX 2 "
        "picks this one");
  // An index naming neither is no answer: the error says so.
  CHECK_THROWS_WITH(match(pods, {"MA_CURRENT_HOST_IP=10.0.0.2", "VC_TASK_INDEX=0"}),
                    Contains("matches 2 servers of the rank table by host_ip/server_id") &&
                        Contains("(VC_TASK_INDEX 0 names another server)"));
  CHECK_THROWS_WITH(match(pods, {"MA_CURRENT_HOST_IP=10.0.0.2", "VC_TASK_INDEX=1", "VC_A_NUM=1", "VC_B_NUM=2"}),
                    Contains("(the Volcano job has 2 tasks"));
  // Shared interface addresses too: the index keeps the address it rests on.
  const RankTable same = table_of({"10.0.0.1", "fe80::1"});
  const ServerMatch both =
      match(same, {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2"}, at({"10.0.0.1", "fe80::1"}, "vm"));
  CHECK(both.index == 1);
  CHECK(both.local_address == "fe80::1");
}

TEST_CASE("a task of an engine is known by the engine's task variables", "[engine_identity]") {
  using davincirun::detail::engine_of_task;
  CHECK(engine_of_task(Environment()) == nullptr);
  CHECK(engine_of_task(Environment({"OMPI_COMM_WORLD_SIZE="})) == nullptr);  // empty: unset
  for (const char* entry : {"OMPI_COMM_WORLD_SIZE=2", "PMIX_RANK=0"}) {
    const auto* engine = engine_of_task(Environment({entry}));
    REQUIRE(engine != nullptr);
    CHECK(engine->name == "Open MPI");
  }
  REQUIRE(engine_of_task(Environment({"PMI_RANK=1"})) != nullptr);
  CHECK(engine_of_task(Environment({"PMI_RANK=1"}))->name == "PMI");
  REQUIRE(engine_of_task(Environment({"SLURM_STEP_ID=0"})) != nullptr);
  CHECK(engine_of_task(Environment({"SLURM_STEP_ID=0"}))->name == "Slurm");
  // An index alone is no task: a Slurm batch script's agent (SLURM_NODEID,
  // no step) and a Volcano pod have terminals of their own.
  CHECK(engine_of_task(Environment({"SLURM_NODEID=1", "OMPI_COMM_WORLD_RANK=1", "VC_TASK_INDEX=1"})) == nullptr);
}
