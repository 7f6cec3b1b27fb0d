// Merging the tables of several servers: order, ranks, kept fields, and the
// refusals that name both files.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "davincirun/errors.hpp"
#include "davincirun/rank_table_merge.hpp"
#include "test_rank_table_support.hpp"
#include "test_support.hpp"

using Catch::Matchers::Contains;
using davincirun::merge_rank_tables;
using davincirun::RankTableError;
using davincirun_test::TempDir;
using davincirun_test::write_file;
using Kind = RankTableError::Kind;
using namespace rank_table_test;

namespace {

// A one-server 1.0 table of `devices` devices with ranks from `first_rank`
// (a table written on its own machine starts at 0), addresses 192.<net>.0.<d>.
Json server_table(const std::string& id, int net, int devices, int first_rank = 0) {
  Json list = Json::array();
  for (int d = 0; d < devices; ++d) {
    list.push_back({{"device_id", std::to_string(d)},
                    {"device_ip", "192." + std::to_string(net) + ".0." + std::to_string(d + 1)},
                    {"rank_id", std::to_string(first_rank + d)}});
  }
  return {{"version", "1.0"},
          {"server_count", "1"},
          {"server_list", Json::array({{{"server_id", id}, {"device", list}, {"host_nic_ip", "reserve"}}})},
          {"status", "completed"}};
}

std::string write(const TempDir& dir, const std::string& name, const Json& doc) {
  write_file(dir / name, doc.dump(2));
  return dir / name;
}

}  // namespace

TEST_CASE("merging: servers in argument order, ranks renumbered, fields kept", "[merge]") {
  TempDir dir;
  const std::string a = write(dir, "a.json", server_table("10.0.0.2", 2, 8));
  const std::string b = write(dir, "b.json", server_table("10.0.0.1", 1, 4));
  // A two-server table listed against its rank order, devices out of order.
  Json two = server_table("10.0.0.4", 4, 2, 2);
  two["server_list"].push_back(server_table("10.0.0.3", 3, 2)["server_list"][0]);
  std::swap(two["server_list"][1]["device"][0]["rank_id"], two["server_list"][1]["device"][1]["rank_id"]);
  two["server_count"] = "2";
  two["server_list"][0]["host_ip"] = "172.16.0.4";
  const std::string c = write(dir, "c.json", two);

  const auto merged = merge_rank_tables({a, b, c}, dir / "all.json");
  CHECK(merged.world_size == 16);
  REQUIRE(merged.servers.size() == 4);
  const std::vector<std::string> order = {"10.0.0.2", "10.0.0.1", "10.0.0.3", "10.0.0.4"};
  const std::vector<int> starts = {0, 8, 12, 14};
  for (std::size_t i = 0; i < order.size(); ++i) {
    CAPTURE(i);
    CHECK(merged.servers[i].server_id == order[i]);
    CHECK(merged.servers[i].rank_start == starts[i]);
  }
  // Each device keeps its place within its server.
  CHECK(merged.servers[1].devices[0].rank_id == 8);
  CHECK(merged.servers[2].devices[0].rank_id == 13);
  CHECK(merged.servers[2].devices[1].rank_id == 12);
  CHECK(merged.servers[3].host_ip == std::optional<std::string>("172.16.0.4"));
  const Json doc = Json::parse(merged.normalized_json);
  CHECK(doc["version"] == "1.0");
  CHECK(doc["server_count"] == "4");
  CHECK(doc["status"] == "completed");
  CHECK(doc["server_list"][0]["host_nic_ip"] == "reserve");

  // A 0.1 table (converted) can be merged too.
  const auto with_v0 = merge_rank_tables({a, corpus_dir + "valid/v0_two_pods_out_of_order.json"}, "all.json");
  CHECK(with_v0.world_size == 16);
  CHECK(with_v0.servers[1].rank_start == 8);
  CHECK(with_v0.format == davincirun::RankTableFormat::v1_0);
}

TEST_CASE("merging: a server or device_ip in two tables is refused, naming both", "[merge]") {
  TempDir dir;
  const std::string a = write(dir, "a.json", server_table("10.0.0.1", 1, 2));
  const std::string again = write(dir, "again.json", server_table("::ffff:10.0.0.1", 2, 2));
  auto e = error_of([&] { merge_rank_tables({a, again}, "out.json"); });
  CHECK(e.kind() == Kind::duplicate);
  CHECK(e.source() == again);
  CHECK(e.pointer() == some("/server_list/0/server_id"));
  CHECK(e.detail() == "server ::ffff:10.0.0.1 is also in " + a +
                          " (/server_list/0/server_id): each server's table can be merged once");

  const std::string same_ip = write(dir, "b.json", server_table("10.0.0.2", 1, 2));
  e = error_of([&] { merge_rank_tables({a, same_ip}, "out.json"); });
  CHECK(e.kind() == Kind::duplicate);
  CHECK(std::string(e.what()) == same_ip + ": /server_list/0/device/0/device_ip: device_ip \"192.1.0.1\" is also in " +
                                     a + " (/server_list/0/device/0/device_ip)");
}

TEST_CASE("merging: what a table of several servers cannot hold is refused by file", "[merge]") {
  TempDir dir;
  const std::string a = write(dir, "a.json", server_table("10.0.0.1", 1, 2));
  Json bare = server_table("10.0.0.2", 2, 2);
  bare["server_list"][0]["device"][1].erase("device_ip");
  const std::string b = write(dir, "b.json", bare);
  CHECK(merge_rank_tables({b}, "alone.json").world_size == 2);  // one server needs none
  auto e = error_of([&] { merge_rank_tables({a, b}, "out.json"); });
  CHECK(e.kind() == Kind::missing);
  CHECK(e.source() == b);
  CHECK(e.pointer() == some("/server_list/0/device/1/device_ip"));
  CHECK_THAT(e.detail(), Contains("server 10.0.0.2, device 1 has no device_ip"));

  Json initializing = server_table("10.0.0.3", 3, 1);
  initializing["status"] = "initializing";
  e = error_of([&] { merge_rank_tables({a, write(dir, "c.json", initializing)}, "out.json"); });
  CHECK(e.kind() == Kind::bad_value);
  CHECK(e.pointer() == some("/status"));

  e = error_of([&] { merge_rank_tables({a, corpus_dir + "valid/v1_2_superpod_two_pods.json"}, "out.json"); });
  CHECK(e.kind() == Kind::unsupported);

  e = error_of([&] { merge_rank_tables({a, dir / "missing.json"}, "out.json"); });
  CHECK(e.kind() == Kind::io);
  CHECK(e.source() == dir / "missing.json");
  e = error_of([&] { merge_rank_tables({corpus_dir + "invalid/duplicate_rank_id.json"}, "out.json"); });
  CHECK(e.kind() == Kind::duplicate);
  CHECK(e.source() == corpus_dir + "invalid/duplicate_rank_id.json");

  CHECK_THROWS_AS(merge_rank_tables({}, "out.json"), std::invalid_argument);
}
