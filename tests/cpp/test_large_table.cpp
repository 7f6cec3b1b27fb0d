// A table of 4,096 servers of 16 devices (65,536 ranks): read, validated and
// planned for one server, with the right ranks; and the uniqueness rules at
// that size still name the first repeat in table order. Timings are
// bench/rank_table_scale.py's, not a test's.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include <fmt/format.h>

#include "davincirun/errors.hpp"
#include "davincirun/plan.hpp"
#include "davincirun/rank_table.hpp"
#include "davincirun/server_identity.hpp"
#include "test_rank_table_support.hpp"
#include "test_support.hpp"

using davincirun::Environment;
using davincirun::LaunchOptions;
using davincirun::LaunchPlan;
using davincirun::RankTableError;
using davincirun_test::TempDir;
using davincirun_test::write_file;
using Kind = RankTableError::Kind;
using namespace rank_table_test;

namespace {

constexpr int servers = 4096;
constexpr int devices = 16;

std::string server_id(int s) { return fmt::format("10.{}.{}.{}", s >> 16, (s >> 8) & 255, s & 255); }
std::string device_ip(int rank) { return fmt::format("172.{}.{}.{}", rank >> 16, (rank >> 8) & 255, rank & 255); }

// The layout platforms write: format 1.0, strings, indented.
Json large_table() {
  Json list = Json::array();
  for (int s = 0; s < servers; ++s) {
    Json device = Json::array();
    for (int d = 0; d < devices; ++d) {
      const int rank = s * devices + d;
      device.push_back(
          {{"device_id", std::to_string(d)}, {"device_ip", device_ip(rank)}, {"rank_id", std::to_string(rank)}});
    }
    list.push_back({{"server_id", server_id(s)}, {"device", std::move(device)}, {"host_nic_ip", "reserve"}});
  }
  return {{"version", "1.0"},
          {"server_count", std::to_string(servers)},
          {"server_list", std::move(list)},
          {"status", "completed"}};
}

LaunchPlan plan_for(const std::string& table, const std::optional<std::string>& server, const TempDir& dir) {
  LaunchOptions options;
  options.command = {"true"};
  options.rank_table = table;
  options.server_id = server;
  options.wait_timeout = std::chrono::milliseconds(0);
  options.device_dir = dir / "no-dev";  // no /dev/davinciN: the table's ids are the numbering
  options.log_dir = dir / "log";
  options.device_lock_dir = "off";
  return davincirun::plan_launch(options, Environment({"PATH=/usr/bin:/bin"}));
}

}  // namespace

TEST_CASE("a table of 65,536 ranks is planned for one of its 4,096 servers", "[rank_table][scale]") {
  TempDir dir;
  Json doc = large_table();
  // The last server is this machine by its address (the rule that compares
  // every server with every interface address).
  const std::vector<std::string> addresses = davincirun::MachineIdentity::current().addresses;
  const std::string here = addresses.empty() ? "" : addresses.front();
  if (!here.empty()) doc["server_list"][servers - 1]["server_id"] = here;
  write_file(dir / "hccl.json", doc.dump(2));

  const auto check_server = [](const LaunchPlan& plan, int s) {
    CHECK(plan.table.world_size == servers * devices);
    CHECK(plan.table.servers.size() == static_cast<std::size_t>(servers));
    CHECK(plan.server_index == static_cast<std::size_t>(s));
    CHECK(plan.job.world_size == servers * devices);
    CHECK(plan.job.rank_start == s * devices);
    CHECK(plan.job.local_world_size == devices);
    CHECK(plan.job.master_addr == server_id(0));
    REQUIRE(plan.ranks.size() == static_cast<std::size_t>(devices));
    for (int d = 0; d < devices; ++d) {
      const auto& rank = plan.ranks[static_cast<std::size_t>(d)];
      CHECK(rank.rank == s * devices + d);
      CHECK(rank.local_rank == d);
      CHECK(rank.physical_device_id == d);
      CHECK(rank.logical_device_id == d);
      CHECK(rank.device_ip == device_ip(s * devices + d));
    }
  };
  check_server(plan_for(dir / "hccl.json", server_id(2500), dir), 2500);
  // Every server derives the same job id and port from the table.
  const LaunchPlan last = plan_for(dir / "hccl.json", doc["server_list"][servers - 1]["server_id"], dir);
  check_server(last, servers - 1);
  const LaunchPlan again = plan_for(dir / "hccl.json", server_id(7), dir);
  CHECK(again.job.job_id == last.job.job_id);
  CHECK(again.job.master_port == last.job.master_port);
  if (here.empty()) {
    WARN("this machine has no interface address: the table is not searched for it");
    return;
  }
  const LaunchPlan found = plan_for(dir / "hccl.json", std::nullopt, dir);
  check_server(found, servers - 1);
  CHECK(found.server_reason == "server_id " + here + " matches an address of this machine");
}

TEST_CASE("at 65,536 ranks, a duplicate is still named at its first repeat in table order", "[rank_table][scale]") {
  Json doc = large_table();
  // Two ranks given twice: 65000 first at server 3000 (its own place comes
  // later, at 4062), 9 again at server 4000. Walking the file, 9 is the
  // first value seen again: it is the one reported, naming where it was first.
  doc["server_list"][3000]["device"][0]["rank_id"] = "65000";
  doc["server_list"][4000]["device"][3]["rank_id"] = "9";
  RankTableError e = doc_error(doc);
  CHECK(e.kind() == Kind::duplicate);
  CHECK(e.pointer() == some("/server_list/4000/device/3/rank_id"));
  CHECK(e.detail() == "rank 9 appears twice (also at /server_list/0/device/9/rank_id)");

  doc = large_table();
  doc["server_list"][4095]["device"][15]["device_ip"] = "::ffff:" + device_ip(17);  // the same address, written apart
  e = doc_error(doc);
  CHECK(e.kind() == Kind::duplicate);
  CHECK(e.pointer() == some("/server_list/4095/device/15/device_ip"));
  CHECK_THAT(e.detail(), Catch::Matchers::EndsWith("(also at /server_list/1/device/1/device_ip)"));

  doc = large_table();
  doc["server_list"][4095]["server_id"] = server_id(2);
  e = doc_error(doc);
  CHECK(e.pointer() == some("/server_list/4095/server_id"));
  CHECK_THAT(e.detail(), Catch::Matchers::Contains("(also at /server_list/2/server_id)"));
}

TEST_CASE("a 2.0 table of 65,536 ranks is grouped into its 4,096 servers and planned for one", "[rank_table][scale]") {
  TempDir dir;
  const std::vector<std::string> addresses = davincirun::MachineIdentity::current().addresses;
  const std::string here = addresses.empty() ? server_id(servers - 1) : addresses.front();
  Json ranks = Json::array();
  for (int rank = 0; rank < servers * devices; ++rank) {
    const int s = rank / devices;
    ranks.push_back(
        {{"rank_id", rank},
         {"device_id", rank % devices},
         {"local_id", rank % devices},
         {"host_ip", s == servers - 1 ? here : server_id(s)},
         {"level_list",
          {{{"net_layer", 0},
            {"net_instance_id", "srv" + std::to_string(s)},
            {"rank_addr_list", {{{"addr_type", "IPV4"}, {"addr", device_ip(rank)}, {"ports", {"0/4"}}}}}}}}});
  }
  write_file(dir / "hccl.json",
             Json({{"version", "2.0"}, {"rank_count", servers * devices}, {"rank_list", std::move(ranks)}}).dump());
  const LaunchPlan plan = plan_for(dir / "hccl.json", addresses.empty() ? std::optional(here) : std::nullopt, dir);
  CHECK(plan.table.format == davincirun::RankTableFormat::v2_0);
  CHECK(plan.table.servers.size() == static_cast<std::size_t>(servers));
  CHECK(plan.server_index == static_cast<std::size_t>(servers - 1));
  CHECK(plan.job.rank_start == (servers - 1) * devices);
  CHECK(plan.job.master_addr == server_id(0));
  REQUIRE(plan.ranks.size() == static_cast<std::size_t>(devices));
  CHECK(plan.ranks.back().rank == servers * devices - 1);
  CHECK(plan.ranks.back().physical_device_id == devices - 1);
}
