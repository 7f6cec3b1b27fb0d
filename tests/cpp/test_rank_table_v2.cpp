// Format 2.0 (Ascend 950 generation): loading, servers made of ranks, errors
// with their exact pointers, the normalized 2.0 copy, merging and narrowing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "davincirun/rank_table.hpp"
#include "davincirun/rank_table_merge.hpp"
#include "plan/plan_tables.hpp"
#include "test_rank_table_support.hpp"
#include "test_support.hpp"

using Catch::Matchers::Contains;
using davincirun::merge_rank_tables;
using davincirun::parse_rank_table;
using davincirun::RankTable;
using davincirun::RankTableError;
using davincirun::RankTableFormat;
using davincirun_test::TempDir;
using davincirun_test::write_file;
using Kind = RankTableError::Kind;
using namespace rank_table_test;

namespace {

// One rank: device `local` of server `server`, reached through the server's
// own layer (net_layer 0, an EID) and a switched one (net_layer 1, an IPv4 address).
Json rank(int rank_id, int local, int server, const std::string& host_ip = "") {
  const std::string eid = fmt::format("000000000000000000{:02x}0000dfdf00{:02x}", server, local);
  Json out = {{"rank_id", rank_id}, {"device_id", local}, {"local_id", local}};
  if (!host_ip.empty()) out["host_ip"] = host_ip;
  out["level_list"] = Json::array(
      {{{"net_layer", 0},
        {"net_instance_id", "srv" + std::to_string(server)},
        {"net_type", "TOPO_FILE_DESC"},
        {"rank_addr_list", Json::array({{{"addr_type", "EID"}, {"addr", eid}, {"ports", {"0/4"}}}})}},
       {{"net_layer", 1},
        {"net_instance_id", "az0"},
        {"net_type", "CLOS"},
        {"rank_addr_list", Json::array({{{"addr_type", "IPV4"},
                                         {"addr", "172.16." + std::to_string(server) + "." + std::to_string(local + 1)},
                                         {"ports", {"1/5", "1/6"}},
                                         {"plane_id", "plane1"}}})}}});
  return out;
}

// `servers` servers of `per_server` ranks in rank order, named by host_ip
// 10.0.0.<1+s> when `by_host`, else by their net_layer 0 ("srv<s>").
Json v2_table(int servers, int per_server, bool by_host = false) {
  Json list = Json::array();
  for (int s = 0; s < servers; ++s) {
    for (int d = 0; d < per_server; ++d) {
      list.push_back(rank(s * per_server + d, d, s, by_host ? "10.0.0." + std::to_string(1 + s) : ""));
    }
  }
  return {{"version", "2.0"}, {"status", "completed"}, {"rank_count", servers * per_server}, {"rank_list", list}};
}

std::vector<std::string> server_ids(const RankTable& table) {
  std::vector<std::string> ids;
  for (const auto& server : table.servers) ids.push_back(server.server_id);
  return ids;
}

void check_error(const Json& doc, Kind kind, const std::string& pointer, const std::string& says) {
  const auto e = doc_error(doc);
  INFO("message: " << e.what());
  CHECK(e.kind() == kind);
  CHECK(e.pointer() == some(pointer));
  CHECK_THAT(e.detail(), Contains(says));
}

}  // namespace

TEST_CASE("2.0: a one-server table loads with its local ids", "[rank_table][v2]") {
  const RankTable table = parse_doc(v2_table(1, 8));
  CHECK(table.format == RankTableFormat::v2_0);
  CHECK(std::string(to_string(table.format)) == "2.0");
  CHECK(table.status == "completed");
  CHECK(table.world_size == 8);
  REQUIRE(table.servers.size() == 1);
  const auto& server = table.servers[0];
  CHECK(server.server_id == "srv0");  // no host_ip: the net_layer 0 names it
  CHECK_FALSE(server.host_ip.has_value());
  CHECK(server.rank_start == 0);
  REQUIRE(server.devices.size() == 8);
  for (std::size_t d = 0; d < 8; ++d) {
    const int id = static_cast<int>(d);
    CHECK(server.devices[d].device_id == id);
    CHECK(server.devices[d].rank_id == id);
    CHECK(server.devices[d].local_id == id);
    CHECK_FALSE(server.devices[d].device_ip.has_value());
  }
  CHECK(table.warnings.empty());
}

TEST_CASE("2.0: ranks of one host_ip are one server, servers in order of first appearance", "[rank_table][v2]") {
  Json doc = v2_table(2, 4, true);
  // The second server's ranks first in the file; one rank writes its host as an IPv4-mapped address.
  Json& list = doc["rank_list"];
  std::rotate(list.begin(), list.begin() + 4, list.end());
  list[6]["host_ip"] = "::ffff:10.0.0.1";
  const RankTable table = parse_doc(doc);
  CHECK(server_ids(table) == std::vector<std::string>{"10.0.0.2", "10.0.0.1"});
  CHECK(table.servers[0].host_ip == some("10.0.0.2"));
  CHECK(table.servers[0].rank_start == 4);
  CHECK(table.servers[1].rank_start == 0);
  REQUIRE(table.servers[1].devices.size() == 4);
  CHECK(table.servers[1].devices[2].rank_id == 2);  // rank_list order within a server
}

TEST_CASE("2.0: without host_ip, the net_layer 0 net_instance_id names the server", "[rank_table][v2]") {
  const RankTable table = parse_doc(v2_table(3, 2));
  CHECK(server_ids(table) == std::vector<std::string>{"srv0", "srv1", "srv2"});
  CHECK(table.servers[2].rank_start == 4);
  // local ids restart on each server; repeated on one, they are refused.
  Json doc = v2_table(1, 4);
  doc[at("/rank_list/3/local_id")] = 1;
  check_error(doc, Kind::duplicate, "/rank_list/3/local_id",
              "local_id 1 listed twice on server srv0 (also at /rank_list/1/local_id)");
  // A rank without a net_layer 0 has no server.
  doc = v2_table(1, 2);
  doc["rank_list"][1]["level_list"].erase(0);
  check_error(doc, Kind::missing, "/rank_list/1/level_list", "no net_layer 0 entry");
  // With a host_ip, the layers do not decide.
  doc = v2_table(1, 2, true);
  doc["rank_list"][1]["level_list"].erase(0);
  CHECK(parse_doc(doc).servers.size() == 1);
}

TEST_CASE("2.0: a host_ip on some ranks only is refused at the first rank without one", "[rank_table][v2]") {
  Json doc = v2_table(2, 2, true);
  doc["rank_list"][1].erase("host_ip");
  doc["rank_list"][3].erase("host_ip");
  check_error(doc, Kind::missing, "/rank_list/1/host_ip", "needs every rank's host address");
  doc = v2_table(1, 2, true);
  doc[at("/rank_list/1/host_ip")] = "node-1";
  check_error(doc, Kind::bad_value, "/rank_list/1/host_ip", "\"node-1\" is not an IP address");
}

TEST_CASE("2.0: each problem is reported at its value's pointer", "[rank_table][v2]") {
  struct Case {
    std::string pointer;  // of the value replaced, or removed when `value` is null
    Json value;
    Kind kind;
    std::string says;
  };
  const std::string layer = "/rank_list/1/level_list/0";
  const std::string address = layer + "/rank_addr_list/0";
  const std::vector<Case> cases = {
      {"/rank_count", nullptr, Kind::missing, "required field missing: rank_count"},
      {"/rank_count", 0, Kind::bad_value, "out of range (1 to 65536), got 0"},
      {"/rank_count", 65537, Kind::bad_value, "out of range (at most 65536)"},
      {"/rank_list", Json::array(), Kind::bad_value, "rank_list is empty"},
      {"/rank_list/1", "rank", Kind::shape, "expected an object"},
      {"/rank_list/1/rank_id", "one", Kind::bad_value, "expected a non-negative decimal integer, got \"one\""},
      {"/rank_list/1/local_id", nullptr, Kind::missing, "required field missing: local_id"},
      {"/rank_list/1/device_id", 65, Kind::bad_value, "out of range (at most 64), got 65"},
      {"/rank_list/1/local_id", -1, Kind::bad_value, "expected a non-negative decimal integer, got -1"},
      {"/rank_list/1/device_port", 0, Kind::bad_value, "out of range (1 to 65535), got 0"},
      {"/rank_list/1/host_port", "70000", Kind::bad_value, "out of range (at most 65535)"},
      {"/rank_list/1/level_list", Json::object(), Kind::shape, "expected an array"},
      {"/rank_list/1/level_list", Json::array(), Kind::bad_value, "level_list is empty"},
      {layer + "/net_layer", 8, Kind::bad_value, "out of range (at most 7), got 8"},
      {layer + "/net_layer", true, Kind::shape, "expected a decimal string or an integer, got true"},
      {layer + "/net_instance_id", "", Kind::bad_value, "net_instance_id must be 1 to 1024 bytes long"},
      {layer + "/net_instance_id", nullptr, Kind::missing, "required field missing: net_instance_id"},
      {layer + "/net_type", 3, Kind::shape, "expected a string, got 3"},
      {layer + "/rank_addr_list", "EID", Kind::shape, "expected an array"},
      {address + "/addr_type", "IPv4", Kind::bad_value, "addr_type must be \"EID\", \"IPV4\" or \"IPV6\""},
      {address + "/addr", "000000000000000000000000dfdf0g00", Kind::bad_value, "is not an EID address"},
      {address + "/ports", Json::array(), Kind::bad_value, "ports must list 1 to 16 ports, got 0"},
      {address + "/ports/0", "", Kind::bad_value, "a port (\"<die>/<port>\") is 1 to 32 bytes long"},
      {address + "/plane_id", 0, Kind::shape, "expected a string, got 0"},
      {"/rank_list/1/level_list/1/rank_addr_list/0/addr", "fe80::1", Kind::bad_value,
       "\"fe80::1\" is not an IPV4 address (expected an IPv4 literal)"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.pointer, c.value.dump());
    Json doc = v2_table(1, 2);
    const Json::json_pointer where(c.pointer);
    if (c.value.is_null()) {
      doc[where.parent_pointer()].erase(where.back());
    } else {
      doc[where] = c.value;
    }
    check_error(doc, c.kind, c.pointer, c.says);
  }
  Json doc = v2_table(1, 2);
  doc[at(address + "/addr_type")] = "IPV6";
  check_error(doc, Kind::bad_value, address + "/addr", "is not an IPV6 address (expected an IPv6 literal)");
  doc = v2_table(1, 2);
  doc[at("/rank_list/1/local_id")] = 64;
  check_error(doc, Kind::missing, "/rank_list/1/replaced_local_id", "local_id 64 is the spare NPU");
  doc[at("/rank_list/1/replaced_local_id")] = 64;
  check_error(doc, Kind::bad_value, "/rank_list/1/replaced_local_id", "out of range (at most 63), got 64");
  doc = v2_table(1, 1);
  doc["version"] = 2.0;
  check_error(doc, Kind::shape, "/version", "expected a string, got 2.0");
}

TEST_CASE("2.0: shape comes before uniqueness, uniqueness before table-wide rules", "[rank_table][v2]") {
  Json doc = v2_table(1, 4);
  doc[at("/rank_list/3/rank_id")] = 0;                   // uniqueness
  doc[at("/rank_count")] = 5;                            // table-wide
  doc[at("/rank_list/3/level_list/1/net_layer")] = "x";  // shape, last in the document
  check_error(doc, Kind::bad_value, "/rank_list/3/level_list/1/net_layer", "got \"x\"");
  doc[at("/rank_list/3/level_list/1/net_layer")] = 1;
  check_error(doc, Kind::duplicate, "/rank_list/3/rank_id", "rank 0 appears twice (also at /rank_list/0/rank_id)");
  doc[at("/rank_list/3/device_id")] = 2;  // device_id comes before rank_id
  check_error(doc, Kind::duplicate, "/rank_list/3/device_id", "device 2 listed twice on server srv0");
  doc[at("/rank_list/3/device_id")] = 3;
  doc[at("/rank_list/3/rank_id")] = 3;
  check_error(doc, Kind::inconsistent, "/rank_count", "rank_count is 5 but rank_list has 4 entries");
  doc[at("/rank_count")] = 4;
  doc[at("/rank_list/3/rank_id")] = 9;
  const auto e = doc_error(doc);
  CHECK(e.kind() == Kind::inconsistent);
  CHECK_FALSE(e.pointer().has_value());
  CHECK_THAT(e.detail(), Contains("rank 3 is missing and 9 is out of range"));
}

TEST_CASE("2.0: a server's ranks are one contiguous block", "[rank_table][v2]") {
  Json doc = v2_table(2, 2, true);
  std::swap(doc["rank_list"][1]["rank_id"], doc["rank_list"][2]["rank_id"]);
  const auto e = doc_error(doc);
  CHECK(e.kind() == Kind::inconsistent);
  CHECK_THAT(e.detail(), Contains("server 10.0.0.1 holds 0 and 2 but not 1"));
}

TEST_CASE("2.0: the normalized copy is a 2.0 table of JSON integers that reads back alike", "[rank_table][v2]") {
  Json doc = v2_table(2, 2, true);
  doc.erase("status");
  doc["rank_count"] = "04";
  doc["topo_file_path"] = "/usr/local/Ascend/driver/topo/950/a.json";
  for (Json& r : doc["rank_list"]) {
    r["rank_id"] = std::to_string(r["rank_id"].get<int>());
    r["device_port"] = "16666";
    r["note"] = {{"kept", true}};
    r["level_list"][1]["net_layer"] = "1";
  }
  const RankTable table = parse_doc(doc);
  const Json normalized = Json::parse(table.normalized_json);
  CHECK(normalized.begin().key() == "status");  // added first, as for 1.x
  CHECK(normalized["status"] == "completed");
  CHECK(normalized["version"] == "2.0");
  CHECK(normalized["rank_count"] == 4);
  CHECK(normalized["topo_file_path"] == doc["topo_file_path"]);
  for (std::size_t k = 0; k < 4; ++k) {
    const Json& r = normalized["rank_list"][k];
    CHECK(r["rank_id"].is_number_integer());
    CHECK(r["rank_id"] == static_cast<int>(k));
    CHECK(r["device_port"] == 16666);
    CHECK(r["note"] == doc["rank_list"][k]["note"]);
    CHECK(r["host_ip"] == doc["rank_list"][k]["host_ip"]);
    CHECK(r["level_list"][1]["net_layer"] == 1);
    CHECK(r["level_list"][0]["rank_addr_list"] == doc["rank_list"][k]["level_list"][0]["rank_addr_list"]);
  }
  const RankTable again = parse_rank_table(table.normalized_json, "normalized.json");
  CHECK(again.format == RankTableFormat::v2_0);
  CHECK(server_ids(again) == server_ids(table));
  CHECK(again.world_size == 4);
  CHECK(again.servers[1].devices[1].local_id == 1);
  CHECK(again.normalized_json == table.normalized_json);  // normalizing is idempotent
}

TEST_CASE("2.0: written for people and for the ranks, a table stays 2.0", "[rank_table][v2]") {
  TempDir dir;
  const RankTable table = parse_doc(v2_table(1, 2));
  davincirun::write_rank_table_file(table, dir / "hccl.json");
  davincirun::write_normalized_rank_table(table, dir / "ranks.json");
  for (const char* name : {"hccl.json", "ranks.json"}) {
    const Json written = Json::parse(read_text(dir / name));
    CHECK(written["version"] == "2.0");
    CHECK(written["rank_list"][1]["local_id"] == 1);
  }
}

TEST_CASE("2.0: merging renumbers the ranks of each table after the last and stays 2.0", "[merge][v2]") {
  TempDir dir;
  Json a = v2_table(1, 4, true);
  a["topo_file_path"] = "/usr/local/Ascend/driver/topo/950/a.json";
  Json b = v2_table(2, 2, true);
  for (Json& r : b["rank_list"]) r["host_ip"] = r["host_ip"].get<std::string>() == "10.0.0.1" ? "10.0.0.7" : "10.0.0.8";
  b["rank_list"][0]["vendor"] = "kept";
  write_file(dir / "a.json", a.dump());
  write_file(dir / "b.json", b.dump());
  const RankTable merged = merge_rank_tables({dir / "b.json", dir / "a.json"}, dir / "all.json");
  CHECK(merged.format == RankTableFormat::v2_0);
  CHECK(merged.world_size == 8);
  CHECK(server_ids(merged) == std::vector<std::string>{"10.0.0.7", "10.0.0.8", "10.0.0.1"});
  CHECK(merged.servers[2].rank_start == 4);
  const Json out = Json::parse(merged.normalized_json);
  CHECK(out["rank_count"] == 8);
  CHECK(out["rank_list"][0]["vendor"] == "kept");
  CHECK(out["rank_list"][7]["rank_id"] == 7);
  CHECK_FALSE(out.contains("topo_file_path"));  // the first table's top level: b's
}

TEST_CASE("2.0: merging refuses another format, a server twice, and two ways of grouping", "[merge][v2]") {
  TempDir dir;
  write_file(dir / "v2.json", v2_table(1, 2, true).dump());
  write_file(dir / "v1.json", corpus_doc("valid/v1_single_server_8p.json").dump());
  auto e = error_of([&] { merge_rank_tables({dir / "v2.json", dir / "v1.json"}, "out.json"); });
  CHECK(e.kind() == Kind::unsupported);
  CHECK(e.source() == dir / "v1.json");
  CHECK(e.pointer() == some("/version"));
  CHECK_THAT(e.detail(), Contains("a format 1.0 table cannot be merged with " + dir / "v2.json" + ", a format 2.0"));

  e = error_of([&] { merge_rank_tables({dir / "v2.json", dir / "v2.json"}, "out.json"); });
  CHECK(e.kind() == Kind::duplicate);
  CHECK_THAT(e.detail(), Contains("server 10.0.0.1 is also in " + dir / "v2.json" + " (server 10.0.0.1)"));

  write_file(dir / "layers.json", v2_table(1, 2).dump());
  e = error_of([&] { merge_rank_tables({dir / "v2.json", dir / "layers.json"}, "out.json"); });
  CHECK(e.kind() == Kind::inconsistent);
  CHECK_THAT(e.detail(), Contains("give every rank a host_ip or none"));
}

TEST_CASE("2.0: narrowed to some devices, a one-server table stays 2.0", "[rank_table][v2]") {
  const RankTable four = parse_doc(v2_table(1, 4));
  const RankTable narrowed = davincirun::detail::narrowed_table(four, {3, 1}, "t.json (devices 3,1)");
  CHECK(narrowed.format == RankTableFormat::v2_0);
  REQUIRE(narrowed.servers.size() == 1);
  REQUIRE(narrowed.servers[0].devices.size() == 2);
  CHECK(narrowed.servers[0].devices[0].device_id == 1);
  CHECK(narrowed.servers[0].devices[0].rank_id == 0);
  CHECK(narrowed.servers[0].devices[1].device_id == 3);
  CHECK(Json::parse(narrowed.normalized_json)["rank_count"] == 2);
}

TEST_CASE("2.0: hostile input becomes a RankTableError, never a crash", "[rank_table][v2]") {
  check_hostile_variants(v2_table(2, 1, true).dump());
}
