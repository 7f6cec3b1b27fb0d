// Environment builder: the Environment block, each rank's variables in their
// layers, JOB_ID resolution and a free port.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "davincirun/environment.hpp"

using namespace davincirun;

namespace {

// Every name must appear once; returns name → value.
std::map<std::string, std::string> as_map(const Environment& env) {
  std::map<std::string, std::string> out;
  for (const auto& e : env.entries()) {
    const auto eq = e.find('=');
    REQUIRE(eq != std::string::npos);
    INFO("entry " << e);
    CHECK(out.emplace(e.substr(0, eq), e.substr(eq + 1)).second);
  }
  return out;
}

JobEnvironment a_job() {
  JobEnvironment job;
  job.rank_table_file = "/work/run/hccl.json";
  job.world_size = 16;
  job.rank_start = 8;
  job.local_world_size = 8;
  job.job_id = "job-1234abcd";
  job.master_addr = "10.0.0.1";
  job.master_port = 29500;
  return job;
}

// The same job in MindSpore's dynamic-cluster mode.
JobEnvironment a_dynamic_job() {
  JobEnvironment job = a_job();
  job.launch_mode = LaunchMode::dynamic_cluster;
  job.sched_port = 21234;
  return job;
}

RankAssignment a_rank() {
  RankAssignment rank;
  rank.rank = 10;
  rank.local_rank = 2;
  rank.physical_device_id = 6;
  rank.logical_device_id = 2;
  return rank;
}

}  // namespace

TEST_CASE("Environment sets, keeps, removes and reads variables", "[environment]") {
  Environment env;
  CHECK(env.entries().empty());
  env.set("A", "1");
  env.set("AB", "2");
  env.set("B", "x=y");
  CHECK(env.get("A") == std::optional<std::string>("1"));
  CHECK(env.get("AB") == std::optional<std::string>("2"));
  CHECK(env.get("B") == std::optional<std::string>("x=y"));
  CHECK_FALSE(env.get("C"));
  CHECK_FALSE(env.get("ABC"));

  env.set("A", "overwritten");  // in place: the order is kept
  env.set_default("AB", "ignored");
  env.set_default("C", "");
  CHECK(env.entries() == std::vector<std::string>{"A=overwritten", "AB=2", "B=x=y", "C="});
  CHECK(env.get("C") == std::optional<std::string>(""));  // set, though empty

  env.unset("AB");
  env.unset("NOT_THERE");
  CHECK(env.entries() == std::vector<std::string>{"A=overwritten", "B=x=y", "C="});
  CHECK(env.get("A") == std::optional<std::string>("overwritten"));
}

TEST_CASE("Environment reads NAME=value entries as getenv() would see them", "[environment]") {
  const Environment env({"A=1", "NO_EQUALS", "B=x=y", "A=2", "EMPTY=", "MULTI=line1\nline2"});
  CHECK(env.get("A") == std::optional<std::string>("2"));  // a later duplicate wins
  CHECK_FALSE(env.get("NO_EQUALS"));
  CHECK(env.get("B") == std::optional<std::string>("x=y"));
  CHECK(env.get("EMPTY") == std::optional<std::string>(""));
  CHECK(env.get("MULTI") == std::optional<std::string>("line1\nline2"));
  CHECK(env.entries().size() == 4);

  REQUIRE(::setenv("DAVINCIRUN_TEST_CURRENT", "from this process", 1) == 0);
  const Environment current = Environment::current();
  ::unsetenv("DAVINCIRUN_TEST_CURRENT");
  CHECK(current.get("DAVINCIRUN_TEST_CURRENT") == std::optional<std::string>("from this process"));
}

TEST_CASE("rank_environment sets each rank's identity over whatever was inherited", "[environment]") {
  const Environment inherited({"RANK=5", "LOCAL_RANK={0,1,2,3}", "RANK_ID=9", "DEVICE_ID=7", "JOB_ID=old",
                               "MASTER_PORT=1", "PATH=/usr/bin", "MULTI=line1\nline2\n", "ODD= spaced =x"});
  const auto env = as_map(rank_environment(inherited, a_job(), a_rank()));

  const std::map<std::string, std::string> identity{
      {"RANK_TABLE_FILE", "/work/run/hccl.json"},
      {"RANK_ID", "10"},
      {"RANK_SIZE", "16"},
      {"RANK_START", "8"},
      {"DEVICE_ID", "2"},  // logical, not the physical 6
      {"ASCEND_DEVICE_ID", "2"},
      {"JOB_ID", "job-1234abcd"},
      {"RANK", "10"},
      {"LOCAL_RANK", "2"},
      {"WORLD_SIZE", "16"},
      {"LOCAL_WORLD_SIZE", "8"},
      {"MASTER_ADDR", "10.0.0.1"},
      {"MASTER_PORT", "29500"},
      {"GROUP_RANK", "0"},
      {"GROUP_WORLD_SIZE", "1"},
      {"ROLE_RANK", "10"},
      {"ROLE_WORLD_SIZE", "16"},
      {"TORCHELASTIC_RESTART_COUNT", "0"},
      {"DAVINCIRUN_RESTART_COUNT", "0"},
  };
  for (const auto& [name, value] : identity) {
    INFO(name);
    REQUIRE(env.count(name) == 1);
    CHECK(env.at(name) == value);
  }
  // Defaults when absent (torchrun's six among them); everything else passes through untouched.
  CHECK(env.at("OMP_NUM_THREADS") == "1");  // 8 ranks on this server
  CHECK(env.at("ROLE_NAME") == "default");
  CHECK(env.at("TORCHELASTIC_RUN_ID") == "job-1234abcd");
  CHECK(env.at("TORCHELASTIC_MAX_RESTARTS") == "0");
  CHECK(env.at("TORCHELASTIC_USE_AGENT_STORE") == "False");
  CHECK(env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "1");
  CHECK(env.at("HCCL_CONNECT_TIMEOUT") == "1800");
  CHECK(env.at("PYTHONUNBUFFERED") == "1");  // JobEnvironment::python_unbuffered defaults to true
  CHECK(env.at("PATH") == "/usr/bin");
  CHECK(env.at("MULTI") == "line1\nline2\n");
  CHECK(env.at("ODD") == " spaced =x");
  CHECK(env.size() == identity.size() + 5 + 6);
}

TEST_CASE("rank_environment keeps the user's settings and lets extra override them", "[environment]") {
  const Environment inherited({"HCCL_CONNECT_TIMEOUT=600", "PYTHONUNBUFFERED=0", "PATH=/usr/bin", "A=inherited"});

  SECTION("inherited values of the defaulted variables are kept") {
    const auto env = as_map(rank_environment(inherited, a_job(), a_rank()));
    CHECK(env.at("HCCL_CONNECT_TIMEOUT") == "600");
    CHECK(env.at("PYTHONUNBUFFERED") == "0");
  }
  SECTION("extra wins over inherited values and defaults, not over identity") {
    const auto env = as_map(rank_environment(
        inherited, a_job(), a_rank(),
        {{"A", "extra"}, {"HCCL_CONNECT_TIMEOUT", "900"}, {"NEW", "value"}, {"RANK", "99"}, {"DEVICE_ID", "5"}}));
    CHECK(env.at("A") == "extra");
    CHECK(env.at("HCCL_CONNECT_TIMEOUT") == "900");
    CHECK(env.at("PYTHONUNBUFFERED") == "0");
    CHECK(env.at("NEW") == "value");
    CHECK(env.at("RANK") == "10");
    CHECK(env.at("DEVICE_ID") == "2");
  }
  SECTION("extra sets a defaulted variable the user did not have") {
    const auto env = as_map(rank_environment(Environment(), a_job(), a_rank(), {{"PYTHONUNBUFFERED", "0"}}));
    CHECK(env.at("PYTHONUNBUFFERED") == "0");
    CHECK(env.at("HCCL_CONNECT_TIMEOUT") == "1800");
  }
}

TEST_CASE("PYTHONUNBUFFERED=1 only when the output is watched, and never over the user's", "[environment]") {
  JobEnvironment job = a_job();
  job.python_unbuffered = false;
  CHECK(as_map(rank_environment(Environment({"PATH=/usr/bin"}), job, a_rank())).count("PYTHONUNBUFFERED") == 0);
  CHECK(as_map(rank_environment(Environment({"PYTHONUNBUFFERED=1"}), job, a_rank())).at("PYTHONUNBUFFERED") == "1");
  job.python_unbuffered = true;
  // An empty value is how a user asks for Python's buffering while watching.
  CHECK(as_map(rank_environment(Environment(), job, a_rank(), {{"PYTHONUNBUFFERED", ""}}))
            .at("PYTHONUNBUFFERED")
            .empty());
}

TEST_CASE("resolve_job_id takes the scheduler's id, else makes one", "[environment]") {
  CHECK(resolve_job_id(Environment({"JOB_ID=abc", "BATCH_JOB_ID=batch", "MA_VJ_NAME=ma-job-1"})) == "abc");
  CHECK(resolve_job_id(Environment({"BATCH_JOB_ID=batch-7", "MA_VJ_NAME=ma-job-1"})) == "batch-7");
  CHECK(resolve_job_id(Environment({"JOB_ID=", "BATCH_JOB_ID=batch-7"})) == "batch-7");  // empty = unset
  CHECK(resolve_job_id(Environment({"MA_VJ_NAME=ma-job-123"})) == "modelarts-job-123");
  CHECK(resolve_job_id(Environment({"MA_VJ_NAME=other-123"})) == "other-123");
  CHECK(resolve_job_id(Environment({"JOB_ID=my job/1:x\ny_z"})) == "my-job-1-x-y_z");
  CHECK(resolve_job_id(Environment({"JOB_ID=caf\xc3\xa9"})) == "caf--");  // bytewise

  const std::regex generated("job-[0-9a-f]{8}");
  std::set<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    const std::string id = resolve_job_id(Environment({"PATH=/usr/bin"}));
    INFO(id);
    CHECK(std::regex_match(id, generated));
    ids.insert(id);
  }
  CHECK(ids.size() > 1);  // random, not a constant
}

TEST_CASE("find_free_port returns a port that can be bound", "[environment]") {
  const int port = find_free_port();
  CHECK(port >= 1);
  CHECK(port <= 65535);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::close(fd);
  CHECK(rc == 0);
}

TEST_CASE("identity_variable_names lists exactly what extra cannot override", "[environment]") {
  std::vector<std::pair<std::string, std::string>> extra;
  for (std::string_view name : identity_variable_names()) extra.emplace_back(std::string(name), "from-extra");
  const auto env = as_map(rank_environment(Environment(), a_job(), a_rank(), extra));
  for (std::string_view name : identity_variable_names()) {
    INFO(name);
    CHECK(env.at(std::string(name)) != "from-extra");
  }
  // JOB_ID and MASTER_PORT come from the job, which the planner derives with extra in mind.
  CHECK(std::count(identity_variable_names().begin(), identity_variable_names().end(), "JOB_ID") == 0);
}

TEST_CASE("rank-table mode scrubs MindSpore's dynamic-cluster variables", "[environment]") {
  const Environment inherited({"MS_ROLE=MS_WORKER", "MS_SCHED_HOST=10.0.0.1", "MS_SCHED_PORT=8118", "MS_WORKER_NUM=8",
                               "MS_NODE_ID=3", "MS_OTHER=kept"});
  SECTION("inherited values are removed, others kept") {
    const auto env = as_map(rank_environment(inherited, a_job(), a_rank()));
    for (std::string_view name : scrubbed_variable_names()) CHECK(env.count(std::string(name)) == 0);
    CHECK(env.at("MS_OTHER") == "kept");
  }
  SECTION("a value given explicitly in extra is the caller's choice") {
    const auto env = as_map(rank_environment(inherited, a_job(), a_rank(), {{"MS_ROLE", "MS_SCHED"}}));
    CHECK(env.at("MS_ROLE") == "MS_SCHED");
  }
}

TEST_CASE("MA_CURRENT_HOST_IP defaults to the server's address and keeps a platform's value", "[environment]") {
  JobEnvironment job = a_job();
  job.host_ip = "10.0.2.21";
  CHECK(as_map(rank_environment(Environment(), job, a_rank())).at("MA_CURRENT_HOST_IP") == "10.0.2.21");
  CHECK(as_map(rank_environment(Environment({"MA_CURRENT_HOST_IP=1.2.3.4"}), job, a_rank())).at("MA_CURRENT_HOST_IP") ==
        "1.2.3.4");
}

TEST_CASE("a dynamic-cluster worker gets msrun's variables beside its rank identity", "[dynamic_cluster]") {
  const Environment inherited({"MS_ROLE=MS_SCHED", "MS_NODE_ID=99", "MS_SCHED_PORT=1"});
  const auto env = as_map(rank_environment(inherited, a_dynamic_job(), a_rank()));
  CHECK(env.at("MS_ROLE") == "MS_WORKER");
  CHECK(env.at("MS_NODE_ID") == "10");
  CHECK(env.at("RANK_ID") == "10");
  CHECK(env.at("MS_SCHED_HOST") == "10.0.0.1");
  CHECK(env.at("MS_SCHED_PORT") == "21234");
  CHECK(env.at("MS_WORKER_NUM") == "16");
  CHECK(env.at("RANK_SIZE") == "16");
  CHECK(env.at("DEVICE_ID") == "2");
  CHECK(env.at("ASCEND_DEVICE_ID") == "2");
  CHECK(env.at("RANK_TABLE_FILE") == "/work/run/hccl.json");
}

TEST_CASE("the scheduler gets msrun's scheduler variables and no device or torch identity", "[dynamic_cluster]") {
  RankAssignment scheduler;
  scheduler.role = ProcessRole::scheduler;
  scheduler.rank = scheduler.local_rank = scheduler.physical_device_id = scheduler.logical_device_id = -1;
  const Environment inherited({"DEVICE_ID=3", "RANK=5", "MASTER_PORT=1", "LOCAL_RANK={0,1}", "KEEP=yes"});
  const auto env = as_map(rank_environment(inherited, a_dynamic_job(), scheduler));
  CHECK(env.at("MS_ROLE") == "MS_SCHED");
  CHECK(env.at("MS_SCHED_HOST") == "10.0.0.1");
  CHECK(env.at("MS_SCHED_PORT") == "21234");
  CHECK(env.at("MS_WORKER_NUM") == "16");
  CHECK(env.at("RANK_ID") == "0");
  CHECK(env.at("RANK_SIZE") == "16");
  CHECK(env.at("JOB_ID") == "job-1234abcd");
  CHECK(env.at("KEEP") == "yes");
  for (const char* gone :
       {"MS_NODE_ID", "DEVICE_ID", "ASCEND_DEVICE_ID", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
        "MASTER_ADDR", "MASTER_PORT", "RANK_START", "GROUP_RANK", "ROLE_RANK", "TORCHELASTIC_RESTART_COUNT"}) {
    INFO(gone);
    CHECK(env.count(gone) == 0);
  }
}

TEST_CASE("every rank gets torchrun's whole worker contract", "[environment]") {
  JobEnvironment job = a_job();
  job.group_rank = 1;
  job.group_world_size = 2;
  const Environment inherited({"GROUP_RANK=7", "ROLE_RANK=7", "TORCHELASTIC_RESTART_COUNT=3"});
  const auto env = as_map(rank_environment(inherited, job, a_rank()));
  // The names torch 2.x's local elastic agent gives each worker, with the values they mean here.
  CHECK(env.at("GROUP_RANK") == "1");  // this server's position; an inherited value is another launch's
  CHECK(env.at("GROUP_WORLD_SIZE") == "2");
  CHECK(env.at("ROLE_NAME") == "default");
  CHECK(env.at("ROLE_RANK") == "10");
  CHECK(env.at("ROLE_WORLD_SIZE") == "16");
  CHECK(env.at("TORCHELASTIC_RUN_ID") == "job-1234abcd");
  CHECK(env.at("TORCHELASTIC_RESTART_COUNT") == "0");
  CHECK(env.at("TORCHELASTIC_MAX_RESTARTS") == "0");
  CHECK(env.at("TORCHELASTIC_USE_AGENT_STORE") == "False");
  CHECK(env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "1");
}

TEST_CASE("the job-wide torchrun names and OMP_NUM_THREADS keep the user's values", "[environment]") {
  const Environment inherited(
      {"ROLE_NAME=trainer", "TORCHELASTIC_RUN_ID=mine", "TORCH_NCCL_ASYNC_ERROR_HANDLING=0", "OMP_NUM_THREADS=4"});
  SECTION("inherited") {
    const auto env = as_map(rank_environment(inherited, a_job(), a_rank()));
    CHECK(env.at("ROLE_NAME") == "trainer");
    CHECK(env.at("TORCHELASTIC_RUN_ID") == "mine");
    CHECK(env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "0");
    CHECK(env.at("OMP_NUM_THREADS") == "4");
  }
  SECTION("given as extra variables") {
    const auto env = as_map(rank_environment(Environment(), a_job(), a_rank(), {{"OMP_NUM_THREADS", "2"}}));
    CHECK(env.at("OMP_NUM_THREADS") == "2");
  }
}

TEST_CASE("OMP_NUM_THREADS is 1 when unset and the server runs several ranks, as torchrun sets it", "[environment]") {
  JobEnvironment job = a_job();
  CHECK(as_map(rank_environment(Environment(), job, a_rank())).at("OMP_NUM_THREADS") == "1");
  job.local_world_size = 1;  // one rank has every core to itself
  CHECK(as_map(rank_environment(Environment(), job, a_rank())).count("OMP_NUM_THREADS") == 0);
}

TEST_CASE("MS_TOPO_TIMEOUT follows the wait timeout in dynamic-cluster mode, unless set", "[dynamic_cluster]") {
  JobEnvironment job = a_dynamic_job();
  job.topo_timeout_s = 300;
  CHECK(as_map(rank_environment(Environment(), job, a_rank())).at("MS_TOPO_TIMEOUT") == "300");
  CHECK(as_map(rank_environment(Environment({"MS_TOPO_TIMEOUT=60"}), job, a_rank())).at("MS_TOPO_TIMEOUT") == "60");
  job.topo_timeout_s = 0;  // --wait-timeout 0: MindSpore's own default stands
  CHECK(as_map(rank_environment(Environment(), job, a_rank())).count("MS_TOPO_TIMEOUT") == 0);
  // Rank-table mode: MindSpore forms no cluster of its own.
  JobEnvironment table_job = a_job();
  table_job.topo_timeout_s = 300;
  CHECK(as_map(rank_environment(Environment(), table_job, a_rank())).count("MS_TOPO_TIMEOUT") == 0);
}
