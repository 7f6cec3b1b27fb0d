// The launch modes for TensorFlow: TF_CONFIG (tf-config) and CANN's CM_*
// variables (cm), per rank and as every server of a job plans them alike;
// and what no mode inherits from the launcher.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <string>

#include "davincirun/environment.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/plan.hpp"
#include "test_support.hpp"

using namespace davincirun;
using namespace davincirun_test;
using Json = nlohmann::json;

namespace {

std::map<std::string, std::string> as_map(const Environment& env) {
  std::map<std::string, std::string> out;
  for (const auto& entry : env.entries()) {
    const auto eq = entry.find('=');
    out[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return out;
}

// Two servers of two ranks each; rank 0 is the second device of 10.0.0.1.
constexpr const char* two_servers = R"({"version": "1.0", "server_count": "2", "status": "completed",
  "server_list": [
    {"server_id": "10.0.0.1", "device": [{"device_id": "4", "device_ip": "192.1.0.4", "rank_id": "1"},
                                         {"device_id": "5", "device_ip": "192.1.0.5", "rank_id": "0"}]},
    {"server_id": "node-b", "host_ip": "10.0.0.2",
     "device": [{"device_id": "0", "device_ip": "192.1.1.0", "rank_id": "2"},
                {"device_id": "1", "device_ip": "192.1.1.1", "rank_id": "3"}]}]})";

LaunchPlan plan_as(const std::string& table_path, const std::string& server_id, LaunchMode mode,
                   const Environment& env = Environment({"JOB_ID=tf-job"})) {
  LaunchOptions options;
  options.command = {"true"};
  options.rank_table = table_path;
  options.wait_timeout = std::chrono::milliseconds(0);
  options.server_id = server_id;
  options.launch_mode = mode;
  return plan_launch(options, env);
}

}  // namespace

TEST_CASE("the launch modes are spelled as the front ends spell them", "[launch_modes]") {
  CHECK(parse_launch_mode("tf-config") == LaunchMode::tf_config);
  CHECK(parse_launch_mode("cm") == LaunchMode::cm);
  CHECK(std::string(to_string(LaunchMode::tf_config)) == "tf-config");
  CHECK_THROWS_WITH(parse_launch_mode("tf_config"),
                    Catch::Contains("rank-table, dynamic-cluster, tf-config or cm, got 'tf_config'"));
}

TEST_CASE("tf-config: every server lists the same workers, each rank is its own task", "[launch_modes]") {
  TempDir dir;
  const std::string table = dir.path() + "/hccl.json";
  write_file(table, two_servers);
  const LaunchPlan a = plan_as(table, "10.0.0.1", LaunchMode::tf_config);
  const LaunchPlan b = plan_as(table, "node-b", LaunchMode::tf_config);
  CHECK(a.job.tf_cluster_json == b.job.tf_cluster_json);
  const Json cluster = Json::parse(a.job.tf_cluster_json);
  REQUIRE(cluster.at("worker").size() == 4);
  // Rank order; a server's ports are consecutive from one base in rank order, alike everywhere.
  const std::string first = cluster["worker"][0];
  const int base = std::stoi(first.substr(first.find(':') + 1));
  CHECK(cluster["worker"][0] == "10.0.0.1:" + std::to_string(base));
  CHECK(cluster["worker"][1] == "10.0.0.1:" + std::to_string(base + 1));
  CHECK(cluster["worker"][2] == "10.0.0.2:" + std::to_string(base));  // host_ip, not the server_id
  CHECK(cluster["worker"][3] == "10.0.0.2:" + std::to_string(base + 1));
  CHECK(base >= first_derived_port);
  CHECK(base <= last_derived_port);
  for (const LaunchPlan* plan : {&a, &b}) {
    for (std::size_t i = 0; i < plan->ranks.size(); ++i) {
      const auto env = as_map(plan->environments[i]);
      const Json config = Json::parse(env.at("TF_CONFIG"));
      CHECK(config["cluster"] == cluster);
      CHECK(config["task"] == Json{{"type", "worker"}, {"index", plan->ranks[i].rank}});
      CHECK(env.at("RANK_ID") == std::to_string(plan->ranks[i].rank));  // the rank table's names stay
      CHECK(env.count("CM_CHIEF_IP") == 0);
    }
  }
  // A restart keeps TF_CONFIG: each port is one rank's own, bound again by its new process.
  CHECK(a.attempt_ports.names == std::vector<std::string>{"MASTER_PORT"});
}

TEST_CASE("tf-config on one machine: loopback and a distinct free port per rank", "[launch_modes]") {
  LaunchOptions options;
  options.command = {"true"};
  options.nproc = 3;
  options.launch_mode = LaunchMode::tf_config;
  const LaunchPlan plan = plan_launch(options, Environment());
  const Json cluster = Json::parse(plan.job.tf_cluster_json);
  REQUIRE(cluster["worker"].size() == 3);
  std::set<std::string> workers;
  for (const auto& worker : cluster["worker"]) {
    CHECK(worker.get<std::string>().rfind("127.0.0.1:", 0) == 0);
    workers.insert(worker.get<std::string>());
  }
  CHECK(workers.size() == 3);
}

TEST_CASE("cm: CANN's variables per rank and no rank table variables", "[launch_modes]") {
  TempDir dir;
  const std::string table = dir.path() + "/hccl.json";
  write_file(table, two_servers);
  const Environment launcher({"JOB_ID=tf-job", "RANK_TABLE_FILE=/elsewhere.json", "RANK_ID=9", "RANK_SIZE=9"});
  const LaunchPlan a = plan_as(table, "10.0.0.1", LaunchMode::cm, launcher);
  const LaunchPlan b = plan_as(table, "node-b", LaunchMode::cm, launcher);
  CHECK(a.job.cm_chief_port == b.job.cm_chief_port);
  CHECK(a.attempt_ports.names == std::vector<std::string>{"MASTER_PORT", "CM_CHIEF_PORT"});
  for (const LaunchPlan* plan : {&a, &b}) {
    const std::string worker_ip = plan == &a ? "10.0.0.1" : "10.0.0.2";
    for (std::size_t i = 0; i < plan->ranks.size(); ++i) {
      const auto env = as_map(plan->environments[i]);
      INFO("rank " << plan->ranks[i].rank);
      CHECK(env.at("CM_CHIEF_IP") == "10.0.0.1");
      CHECK(env.at("CM_CHIEF_PORT") == std::to_string(a.job.cm_chief_port));
      CHECK(env.at("CM_CHIEF_DEVICE") == "1");  // rank 0 is physical device 5, logical 1 of {4, 5}
      CHECK(env.at("CM_WORKER_IP") == worker_ip);
      CHECK(env.at("CM_WORKER_SIZE") == "4");
      for (const char* absent : {"RANK_TABLE_FILE", "RANK_ID", "RANK_SIZE", "TF_CONFIG"}) {
        INFO(absent);
        CHECK(env.count(absent) == 0);
      }
      CHECK(env.at("DEVICE_ID") == std::to_string(plan->ranks[i].logical_device_id));
      CHECK(env.at("JOB_ID") == "tf-job");
    }
  }
}

TEST_CASE("cm: a server known only by name has no address CANN can read", "[launch_modes]") {
  TempDir dir;
  const std::string table = dir.path() + "/hccl.json";
  write_file(table, R"({"version": "1.0", "server_list": [
    {"server_id": "node-a", "device": [{"device_id": "0", "device_ip": "192.1.0.1", "rank_id": "0"}]},
    {"server_id": "node-b", "device": [{"device_id": "0", "device_ip": "192.1.0.2", "rank_id": "1"}]}]})");
  CHECK_THROWS_WITH(plan_as(table, "node-b", LaunchMode::cm),
                    Catch::Contains("launch mode cm: the address of rank 0's server (CM_CHIEF_IP) is 'node-a', "
                                    "not an IP address"));
}

TEST_CASE("cm: the rank table's variables given explicitly are dropped, with a warning", "[launch_modes]") {
  LaunchOptions options;
  options.command = {"true"};
  options.nproc = 2;
  options.launch_mode = LaunchMode::cm;
  options.env = {{"RANK_SIZE", "2"}, {"CM_WORKER_IP", "1.2.3.4"}};
  const LaunchPlan plan = plan_launch(options, Environment());
  const auto env = as_map(plan.environments[1]);
  CHECK(env.count("RANK_SIZE") == 0);
  CHECK(env.at("CM_WORKER_IP") == "127.0.0.1");
  CHECK(env.at("CM_CHIEF_IP") == "127.0.0.1");
  CHECK(env.at("CM_CHIEF_DEVICE") == "0");
  CHECK_THAT(plan.warnings.at(0), Catch::Contains("RANK_SIZE is removed from every rank in launch mode cm"));
  CHECK_THAT(plan.warnings.at(1), Catch::Contains("CM_WORKER_IP has no effect among the extra variables"));
}

TEST_CASE("no mode inherits the launcher's TF_CONFIG or CM_* variables", "[launch_modes]") {
  JobEnvironment job;
  job.world_size = 1;
  job.local_world_size = 1;
  RankAssignment rank;
  const Environment inherited({"TF_CONFIG={\"cluster\":{}}", "CM_CHIEF_IP=10.9.9.9", "CM_WORKER_SIZE=64", "KEEP=1"});
  const auto env = as_map(rank_environment(inherited, job, rank));
  CHECK(env.count("TF_CONFIG") == 0);
  CHECK(env.count("CM_CHIEF_IP") == 0);
  CHECK(env.count("CM_WORKER_SIZE") == 0);
  CHECK(env.at("KEEP") == "1");
  // Given explicitly, the user's TF_CONFIG is theirs in the other modes.
  CHECK(as_map(rank_environment(inherited, job, rank, {{"TF_CONFIG", "{}"}})).at("TF_CONFIG") == "{}");
}
