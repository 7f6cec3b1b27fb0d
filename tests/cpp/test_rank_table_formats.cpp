// Rank table formats beyond plain 1.0: 0.1 (converted to 1.0, errors in the
// original's terms), 1.2 (SuperPoD), and the device_ip placeholder.
#include <catch2/catch.hpp>

#include <string>

#include "davincirun/rank_table.hpp"
#include "test_rank_table_support.hpp"

using Catch::Matchers::Contains;
using davincirun::parse_rank_table;
using davincirun::RankTable;
using davincirun::RankTableError;
using davincirun::RankTableFormat;
using Kind = RankTableError::Kind;
using namespace rank_table_test;

namespace {

// Pods "-1" (server 10.0.0.22) then "-0" (server 10.0.0.21), four devices each.
Json v0_table() { return corpus_doc("valid/v0_two_pods_out_of_order.json"); }

Json v1_2_table() { return corpus_doc("valid/v1_2_superpod_two_pods.json"); }

}  // namespace

// ---- format 0.1 -----------------------------------------------------------------

TEST_CASE("0.1: pods are ordered by their number and keep their devices", "[rank_table]") {
  const RankTable table = parse_doc(v0_table());
  CHECK(table.format == RankTableFormat::v0_1);
  CHECK(std::string(to_string(table.format)) == "0.1");
  CHECK(table.status == "completed");
  REQUIRE(table.servers.size() == 2);
  const auto& first = table.servers[0];
  CHECK(first.server_id == "10.0.0.21");
  CHECK(first.pod_names == std::vector<std::string>{"job0a1b2c3d-job-demo-0"});
  REQUIRE(first.devices.size() == 4);
  for (std::size_t j = 0; j < 4; ++j) {
    CHECK(first.devices[j].device_id == static_cast<int>(j));
    CHECK(first.devices[j].rank_id == static_cast<int>(j));
    CHECK(first.devices[j].pod_name == some("job0a1b2c3d-job-demo-0"));
  }
  CHECK(table.servers[1].devices[0].rank_id == 4);
  CHECK(table.servers[1].devices[0].pod_name == some("job0a1b2c3d-job-demo-1"));
  CHECK(table.servers[1].devices[0].device_ip == some("192.1.22.20"));
}

TEST_CASE("0.1: ranks follow pod numbers, not names or file order", "[rank_table]") {
  Json doc = v0_table();
  // "-10" sorts before "-9" as text; as numbers it comes after.
  doc[at("/group_list/0/instance_list/0/pod_name")] = "job-demo-10";
  doc[at("/group_list/0/instance_list/1/pod_name")] = "job-demo-9";
  const RankTable table = parse_doc(doc);
  CHECK(table.servers[0].pod_names == std::vector<std::string>{"job-demo-9"});
  CHECK(table.servers[1].rank_start == 4);
  // Devices keep their file order within a pod.
  doc[at("/group_list/0/instance_list/1/devices/0/device_id")] = "7";
  CHECK(parse_doc(doc).servers[0].devices[0].device_id == 7);
}

TEST_CASE("0.1: pods sharing a server_id become one server", "[rank_table]") {
  Json doc = v0_table();
  doc[at("/group_list/0/instance_list/0/server_id")] = "10.0.0.21";
  for (int d = 0; d < 4; ++d) {
    doc[at("/group_list/0/instance_list/0/devices/" + std::to_string(d) + "/device_id")] = std::to_string(d + 4);
  }
  const RankTable table = parse_doc(doc);
  REQUIRE(table.servers.size() == 1);
  const auto& server = table.servers[0];
  CHECK(server.pod_names == std::vector<std::string>{"job0a1b2c3d-job-demo-0", "job0a1b2c3d-job-demo-1"});
  REQUIRE(server.devices.size() == 8);
  CHECK(server.devices[3].pod_name == some("job0a1b2c3d-job-demo-0"));
  CHECK(server.devices[4].pod_name == some("job0a1b2c3d-job-demo-1"));
  CHECK(server.devices[4].device_id == 4);
  CHECK(server.devices[4].rank_id == 4);
  const Json copy = Json::parse(table.normalized_json);
  CHECK(copy["server_count"] == "1");
  CHECK(copy["server_list"][0]["device"].size() == 8);

  SECTION("the same device twice on the merged server, at its place in the original") {
    doc[at("/group_list/0/instance_list/0/devices/2/device_id")] = "1";
    const auto e = doc_error(doc);
    CHECK(e.kind() == Kind::duplicate);
    CHECK(e.pointer() == some("/group_list/0/instance_list/0/devices/2/device_id"));
    CHECK(e.detail() ==
          "device 1 listed twice on server 10.0.0.21 (also at "
          "/group_list/0/instance_list/1/devices/1/device_id)");
  }
  SECTION("pods of one server must be adjacent in rank order") {
    Json three = doc;
    Json pod = three[at("/group_list/0/instance_list/0")];
    pod["pod_name"] = "job0a1b2c3d-job-demo-2";
    pod["server_id"] = "10.0.0.23";
    for (std::size_t d = 0; d < 4; ++d) pod["devices"][d]["device_ip"] = "192.9.0." + std::to_string(d);
    three[at("/group_list/0/instance_list/0/pod_name")] = "job0a1b2c3d-job-demo-5";
    three["group_list"][0]["instance_list"].push_back(pod);
    three["group_list"][0]["device_count"] = "12";
    three["group_list"][0]["instance_count"] = "3";
    const auto e = doc_error(three);
    CHECK(e.kind() == Kind::inconsistent);
    CHECK(e.pointer() == some("/group_list/0/instance_list/0/server_id"));
    CHECK_THAT(e.detail(),
               Contains("share server 10.0.0.21") && Contains("\"job0a1b2c3d-job-demo-2\" comes between them"));
  }
}

TEST_CASE("0.1: errors point into the original document", "[rank_table]") {
  Json doc = v0_table();
  SECTION("a bad device_id") {
    doc[at("/group_list/0/instance_list/1/devices/0/device_id")] = "x";
    const auto e = doc_error(doc);
    CHECK(e.kind() == Kind::bad_value);
    CHECK(e.pointer() == some("/group_list/0/instance_list/1/devices/0/device_id"));
  }
  SECTION("a missing device_ip on a multi-server table") {
    doc[at("/group_list/0/instance_list/1/devices/2")].erase("device_ip");
    const auto e = doc_error(doc);
    CHECK(e.kind() == Kind::missing);
    CHECK(e.pointer() == some("/group_list/0/instance_list/1/devices/2/device_ip"));
  }
  SECTION("a repeated device_ip, at its second occurrence in rank order") {
    doc[at("/group_list/0/instance_list/0/devices/3/device_ip")] = "192.1.21.20";
    const auto e = doc_error(doc);
    CHECK(e.kind() == Kind::duplicate);
    CHECK(e.pointer() == some("/group_list/0/instance_list/0/devices/3/device_ip"));
    CHECK_THAT(e.detail(), Contains("also at /group_list/0/instance_list/1/devices/0/device_ip"));
  }
  SECTION("required fields of a pod") {
    doc[at("/group_list/0/instance_list/1")].erase("pod_name");
    CHECK(doc_error(doc).pointer() == some("/group_list/0/instance_list/1/pod_name"));
  }
  SECTION("pod names: a number is needed to order several pods, each name once") {
    doc[at("/group_list/0/instance_list/1/pod_name")] = "worker";
    auto e = doc_error(doc);
    CHECK(e.kind() == Kind::bad_value);
    CHECK(e.pointer() == some("/group_list/0/instance_list/1/pod_name"));
    CHECK_THAT(e.detail(), Contains("\"worker\" does not end in -<number>"));
    doc[at("/group_list/0/instance_list/1/pod_name")] = "other-1";
    e = doc_error(doc);
    CHECK(e.kind() == Kind::duplicate);
    CHECK(e.pointer() == some("/group_list/0/instance_list/1/pod_name"));
    CHECK_THAT(e.detail(), Contains("same number (1)"));
    doc[at("/group_list/0/instance_list/1/pod_name")] = "job0a1b2c3d-job-demo-1";
    CHECK_THAT(doc_error(doc).detail(), Contains("listed twice"));
  }
  SECTION("counts") {
    doc["group_count"] = "2";
    CHECK(doc_error(doc).pointer() == some("/group_count"));
    doc["group_count"] = 1;
    doc[at("/group_list/0/instance_count")] = "3";
    CHECK(doc_error(doc).detail() == "instance_count is 3 but instance_list has 2 entries");
    doc[at("/group_list/0/instance_count")] = "2";
    doc[at("/group_list/0/device_count")] = "9";
    const auto e = doc_error(doc);
    CHECK(e.kind() == Kind::inconsistent);
    CHECK(e.pointer() == some("/group_list/0/device_count"));
    CHECK(e.detail() == "device_count is 9 but the group's pods list 8 devices");
  }
  SECTION("shapes") {
    doc["group_list"] = Json::array();
    CHECK(doc_error(doc).pointer() == some("/group_list"));
    doc["group_list"] = "x";
    CHECK(doc_error(doc).kind() == Kind::shape);
  }
}

TEST_CASE("0.1: groups without devices are skipped", "[rank_table]") {
  Json doc = v0_table();
  Json empty_group = Json::parse(R"({"group_name": "ps", "device_count": "0",
                                     "instance_list": "not even read"})");
  doc["group_list"].insert(doc["group_list"].begin(), empty_group);
  doc["group_count"] = "2";
  const RankTable table = parse_doc(doc);
  CHECK(table.world_size == 8);
  CHECK(table.servers[0].server_id == "10.0.0.21");

  // A second group with devices: its ranks follow the first group's.
  Json second = v0_table()["group_list"][0];
  second["instance_list"].erase(1);
  second["instance_list"][0]["server_id"] = "10.0.0.30";
  second["instance_list"][0]["pod_name"] = "job-other-0";
  for (std::size_t d = 0; d < 4; ++d) {
    second["instance_list"][0]["devices"][d]["device_ip"] = "10.9.0." + std::to_string(d);
  }
  second["device_count"] = "4";
  second["instance_count"] = "1";
  doc["group_list"].push_back(second);
  doc["group_count"] = "3";
  const RankTable two_groups = parse_doc(doc);
  REQUIRE(two_groups.servers.size() == 3);
  CHECK(two_groups.servers[2].server_id == "10.0.0.30");
  CHECK(two_groups.servers[2].rank_start == 8);

  Json none = v0_table();
  none[at("/group_list/0/device_count")] = "0";
  const auto e = doc_error(none);
  CHECK(e.pointer() == some("/group_list"));
  CHECK_THAT(e.detail(), Contains("every group has device_count 0"));
}

TEST_CASE("0.1: one pod, unknown fields, status", "[rank_table]") {
  Json doc = Json::parse(R"({"status": "initializing", "deploy_mode": "lab", "group_list": [
      {"group_name": "g", "instance_list": [
        {"pod_name": "single", "server_id": "10.0.0.5", "rank_id": "9",
         "devices": [{"device_id": 3}, {"device_id": "1", "device_ip": "-.-.-.-"}]}]}]})");
  const RankTable table = parse_doc(doc);
  CHECK(table.status == "initializing");
  CHECK(table.world_size == 2);
  CHECK(table.servers[0].devices[0].device_id == 3);
  CHECK(table.servers[0].devices[1].rank_id == 1);
  CHECK_FALSE(table.servers[0].devices[1].device_ip.has_value());
  REQUIRE(table.warnings.size() == 1);
  CHECK_THAT(table.warnings[0], Contains("t.json: /group_list/0/instance_list/0/devices/1/device_ip: \"-.-.-.-\""));
  const Json copy = Json::parse(table.normalized_json);
  CHECK(copy == Json::parse(R"({"status": "initializing", "version": "1.0", "server_count": "1",
      "server_list": [{"server_id": "10.0.0.5", "device": [
        {"device_id": "3", "rank_id": "0"}, {"device_id": "1", "rank_id": "1"}]}]})"));
}

TEST_CASE("0.1 and 1.2: hostile input becomes a RankTableError", "[rank_table]") {
  check_hostile_variants(read_text(corpus_dir + "valid/v0_two_pods_out_of_order.json"));
  check_hostile_variants(read_text(corpus_dir + "valid/v1_2_superpod_two_pods.json"));
}

// ---- format 1.2 -----------------------------------------------------------------

TEST_CASE("1.2: super_device_id on every device, super pods read", "[rank_table]") {
  const RankTable table = parse_doc(v1_2_table());
  CHECK(table.format == RankTableFormat::v1_2);
  CHECK(std::string(to_string(table.format)) == "1.2");
  CHECK(table.servers[1].devices[1].super_device_id == 2097153);
  CHECK(table.servers[1].host_ip == some("10.0.1.32"));
  REQUIRE(table.super_pods.size() == 2);
  CHECK(table.super_pods[1].super_pod_id == "1");
  CHECK(table.super_pods[1].server_ids == std::vector<std::string>{"node-b"});

  Json doc = v1_2_table();
  doc[at("/server_list/0/device/0/super_device_id")] = 4294967295;
  CHECK(parse_doc(doc).servers[0].devices[0].super_device_id == 4294967295);
  doc[at("/server_list/0/device/0/super_device_id")] = "4294967296";
  auto e = doc_error(doc);
  CHECK(e.kind() == Kind::bad_value);
  CHECK(e.pointer() == some("/server_list/0/device/0/super_device_id"));
  doc[at("/server_list/0/device/0")].erase("super_device_id");
  e = doc_error(doc);
  CHECK(e.kind() == Kind::missing);
  CHECK(e.detail() == "required field missing: super_device_id (required in version 1.2)");
}

TEST_CASE("1.2: super_pod_list is optional, and checked when present", "[rank_table]") {
  Json doc = v1_2_table();
  SECTION("absent") {
    doc.erase("super_pod_list");
    CHECK(parse_doc(doc).super_pods.empty());
    // Then all servers form one pod for super_device_id uniqueness.
    doc[at("/server_list/1/device/1/super_device_id")] = "1048576";
    const auto e = doc_error(doc);
    CHECK(e.kind() == Kind::duplicate);
    CHECK(e.pointer() == some("/server_list/1/device/1/super_device_id"));
  }
  SECTION("super_device_id repeats across super pods, not within one") {
    doc[at("/server_list/1/device/0/super_device_id")] = "1048576";
    CHECK_NOTHROW(parse_doc(doc));
    doc[at("/server_list/0/device/1/super_device_id")] = 1048576;
    const auto e = doc_error(doc);
    CHECK(e.pointer() == some("/server_list/0/device/1/super_device_id"));
    CHECK_THAT(e.detail(), Contains("super_device_id 1048576 appears twice in one super pod"));
  }
  SECTION("shapes") {
    doc["super_pod_list"] = Json::array();
    CHECK(doc_error(doc).pointer() == some("/super_pod_list"));
    doc["super_pod_list"] = Json::parse(R"([{"server_list": []}])");
    CHECK(doc_error(doc).pointer() == some("/super_pod_list/0/super_pod_id"));
    doc["super_pod_list"] = Json::parse(R"([{"super_pod_id": "", "server_list": []}])");
    CHECK(doc_error(doc).pointer() == some("/super_pod_list/0/super_pod_id"));
    doc["super_pod_list"] = Json::parse(R"([{"super_pod_id": "p", "server_list": []}])");
    CHECK(doc_error(doc).pointer() == some("/super_pod_list/0/server_list"));
    doc["super_pod_list"] = Json::parse(R"([{"super_pod_id": "p", "server_list": [{"server_id": 1}]}])");
    CHECK(doc_error(doc).pointer() == some("/super_pod_list/0/server_list/0/server_id"));
  }
  SECTION("every listed server exists, once; every server is listed") {
    doc[at("/super_pod_list/1/server_list/0/server_id")] = "node-z";
    auto e = doc_error(doc);
    CHECK(e.kind() == Kind::inconsistent);
    CHECK(e.pointer() == some("/super_pod_list/1/server_list/0/server_id"));
    CHECK(e.detail() == "super pod \"1\" lists server node-z, which is not in server_list");
    doc[at("/super_pod_list/1/server_list/0/server_id")] = "node-a";
    e = doc_error(doc);
    CHECK(e.kind() == Kind::duplicate);
    CHECK(e.pointer() == some("/super_pod_list/1/server_list/0/server_id"));
    doc[at("/super_pod_list/1/server_list")] = Json::parse(R"([{"server_id": "node-c"}])");
    doc[at("/super_pod_list/1/super_pod_id")] = "0";
    e = doc_error(doc);
    CHECK(e.kind() == Kind::duplicate);
    CHECK(e.pointer() == some("/super_pod_list/1/super_pod_id"));
    doc[at("/super_pod_list/1/super_pod_id")] = "1";
    doc[at("/super_pod_list/1/server_list/0/server_id")] = "node-a";
    doc["super_pod_list"].erase(1);
    e = doc_error(doc);
    CHECK(e.kind() == Kind::inconsistent);
    CHECK(e.pointer() == some("/server_list/1/server_id"));
    CHECK(e.detail() == "server node-b is in no super pod of super_pod_list");
  }
}

TEST_CASE("1.2: the normalized copy stays 1.2 with decimal strings", "[rank_table]") {
  Json doc = v1_2_table();
  doc[at("/server_list/0/device/0/super_device_id")] = 1048576;
  doc[at("/server_list/0/device/1/rank_id")] = 1;
  doc[at("/super_pod_list/0/super_pod_id")] = 0;
  doc[at("/super_pod_list/0/vendor")] = "kept";
  const Json copy = Json::parse(parse_doc(doc).normalized_json);
  Json expected = v1_2_table();
  expected[at("/super_pod_list/0/vendor")] = "kept";
  CHECK(copy == expected);
}

// ---- the device_ip placeholder ------------------------------------------------------

TEST_CASE("device_ip placeholder: absent with a warning on one server", "[rank_table]") {
  Json doc = corpus_doc("valid/v1_single_server_8p.json");
  doc[at("/server_list/0/device/2/device_ip")] = "-.-.-.-";
  doc[at("/server_list/0/device/5/device_ip")] = "-.-.-.-";
  const RankTable table = parse_doc(doc);
  CHECK_FALSE(table.servers[0].devices[2].device_ip.has_value());
  REQUIRE(table.warnings.size() == 2);
  CHECK_THAT(table.warnings[0], Contains("t.json: /server_list/0/device/2/device_ip: ") && Contains("read as absent"));
  // The copy for the ranks leaves it out, and so has no warning.
  const Json copy = Json::parse(table.normalized_json);
  CHECK_FALSE(copy[at("/server_list/0/device/2")].contains("device_ip"));
  CHECK(copy[at("/server_list/0/device/3/device_ip")] == doc[at("/server_list/0/device/3/device_ip")]);
  CHECK(parse_rank_table(table.normalized_json, "copy").warnings.empty());
  // Several servers need it: an error there (the corpus has that case at /server_list/0).
  const auto e =
      error_of([] { parse_rank_table(read_text(corpus_dir + "invalid/device_ip_placeholder.json"), "p.json"); });
  CHECK(e.kind() == Kind::bad_value);
}
