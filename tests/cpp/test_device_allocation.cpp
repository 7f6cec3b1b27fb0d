// Device allocation: /dev/davinciN discovery on a fake device directory,
// which table entry is this machine, and logical device ids.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "davincirun/device_allocation.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/rank_table.hpp"
#include "test_support.hpp"

using namespace davincirun;
using namespace davincirun_test;
using Catch::Matchers::Contains;

namespace {

struct Device {
  int device_id;
  int rank_id;
};

// A format 1.0 table: one entry per server, each a list of devices.
RankTable table_of(const std::vector<std::pair<std::string, std::vector<Device>>>& servers) {
  std::string list;
  int ip = 1;
  for (const auto& [server_id, devices] : servers) {
    std::string devs;
    for (const auto& d : devices) {
      devs += std::string(devs.empty() ? "" : ",") + R"({"device_id": ")" + std::to_string(d.device_id) +
              R"(", "rank_id": ")" + std::to_string(d.rank_id) + R"(", "device_ip": "192.168.1.)" +
              std::to_string(ip++) + "\"}";
    }
    list += std::string(list.empty() ? "" : ",") + R"({"server_id": ")" + server_id + R"(", "device": [)" + devs + "]}";
  }
  const std::string json = R"({"version": "1.0", "status": "completed", "server_count": ")" +
                           std::to_string(servers.size()) + R"(", "server_list": [)" + list + "]}";
  return parse_rank_table(json, "test.json");
}

// (rank, local rank, physical id, logical id) of each assignment, in order.
std::vector<std::vector<int>> summary(const std::vector<RankAssignment>& assignments) {
  std::vector<std::vector<int>> out;
  for (const auto& a : assignments) {
    out.push_back({a.rank, a.local_rank, a.physical_device_id, a.logical_device_id});
  }
  return out;
}

}  // namespace

TEST_CASE("present_devices lists the N of each /dev/davinciN, sorted", "[device_allocation]") {
  TempDir dev;
  for (const char* name : {"davinci7", "davinci5", "davinci4", "davinci6", "davinci_manager", "davinci_manager_docker",
                           "davinciX", "davinci", "davinci1a", "hisi_hdc", "null"}) {
    write_file(dev / name, "");
  }
  CHECK(present_devices(dev.path()) == std::vector<int>{4, 5, 6, 7});
  CHECK(present_devices(dev / "missing").empty());
  TempDir empty;
  CHECK(present_devices(empty.path()).empty());
}

TEST_CASE("logical device ids follow the sorted physical ids, never the table's order", "[device_allocation]") {
  SECTION("devices listed out of order, no /dev/davinciN here") {
    const RankTable table = table_of({{"s0", {{6, 0}, {4, 1}, {7, 2}, {5, 3}}}});
    // Ordered by rank; each rank keeps its device.
    CHECK(summary(allocate_ranks(table, 0, {})) ==
          std::vector<std::vector<int>>{{0, 0, 6, 2}, {1, 1, 4, 0}, {2, 2, 7, 3}, {3, 3, 5, 1}});
  }
  SECTION("a subset of the machine's devices, no /dev/davinciN here") {
    const RankTable table = table_of({{"s0", {{4, 0}, {5, 1}}}});
    CHECK(summary(allocate_ranks(table, 0, {})) == std::vector<std::vector<int>>{{0, 0, 4, 0}, {1, 1, 5, 1}});
  }
  SECTION("a container that sees only its own devices") {
    const RankTable table = table_of({{"s0", {{4, 0}, {5, 1}, {6, 2}, {7, 3}}}});
    CHECK(summary(allocate_ranks(table, 0, {4, 5, 6, 7})) ==
          std::vector<std::vector<int>>{{0, 0, 4, 0}, {1, 1, 5, 1}, {2, 2, 6, 2}, {3, 3, 7, 3}});
  }
  SECTION("a host that sees all eight devices") {
    const RankTable table = table_of({{"s0", {{4, 0}, {5, 1}, {6, 2}, {7, 3}}}});
    CHECK(summary(allocate_ranks(table, 0, {0, 1, 2, 3, 4, 5, 6, 7})) ==
          std::vector<std::vector<int>>{{0, 0, 4, 4}, {1, 1, 5, 5}, {2, 2, 6, 6}, {3, 3, 7, 7}});
  }
  SECTION("the second server of two: local ranks count from its rank_start") {
    const RankTable table = table_of({{"s0", {{0, 0}, {1, 1}}}, {"s1", {{1, 3}, {0, 2}}}});
    const auto assignments = allocate_ranks(table, 1, {});
    CHECK(summary(assignments) == std::vector<std::vector<int>>{{2, 0, 0, 0}, {3, 1, 1, 1}});
    REQUIRE(assignments[0].device_ip);
    CHECK(*assignments[0].device_ip == "192.168.1.4");  // the device's own address
  }
}

TEST_CASE("a table device missing from /dev is a configuration error naming it", "[device_allocation]") {
  const RankTable table = table_of({{"s0", {{4, 0}, {5, 1}, {6, 2}, {7, 3}}}});
  try {
    allocate_ranks(table, 0, {4, 5, 7});
    FAIL("device 6 is not present, yet allocate_ranks succeeded");
  } catch (const ConfigError& e) {
    CHECK_THAT(e.what(), Contains("device 6"));
    CHECK_THAT(e.what(), Contains("rank 2"));
  }
}

TEST_CASE("ASCEND_RT_VISIBLE_DEVICES renumbers logical ids", "[device_allocation]") {
  const RankTable table = parse_rank_table(R"({"version": "1.0", "server_list": [{"server_id": "s", "device": [
      {"device_id": "5", "rank_id": "0"}, {"device_id": "6", "rank_id": "1"}]}]})",
                                           "visible.json");
  const std::vector<int> present{4, 5, 6, 7};  // physical 5, 6 are logical 1, 2
  SECTION("the position of the logical id in the list") {
    const auto ranks = allocate_ranks(table, 0, present, parse_visible_devices("1,2,3"));
    CHECK(ranks[0].logical_device_id == 0);
    CHECK(ranks[1].logical_device_id == 1);
    CHECK(ranks[1].physical_device_id == 6);
  }
  SECTION("a device the runtime will not see is an error before anything starts") {
    CHECK_THROWS_WITH(allocate_ranks(table, 0, present, parse_visible_devices("0,1")),
                      Catch::Contains("device 6 (rank 1, logical id 2) is not in ASCEND_RT_VISIBLE_DEVICES"));
  }
  SECTION("malformed or unordered lists are refused") {
    for (const char* bad : {"", "1,,2", "2,1", "1,1", "a", "1 ,2", "-1"}) {
      INFO(bad);
      CHECK_THROWS_AS(parse_visible_devices(bad), ConfigError);
    }
    CHECK(parse_visible_devices("0,3,7") == std::vector<int>{0, 3, 7});
  }
}
