// Rank table parser, format 1.0: focused cases (the corpus: test_rank_table_corpus.cpp).
#include <catch2/catch.hpp>

#include <optional>
#include <string>

#include "davincirun/errors.hpp"
#include "davincirun/rank_table.hpp"
#include "test_rank_table_support.hpp"

using Catch::Matchers::Contains;
using davincirun::load_rank_table;
using davincirun::parse_rank_table;
using davincirun::RankTable;
using davincirun::RankTableError;
using davincirun::RankTableFormat;
using Kind = RankTableError::Kind;
using namespace rank_table_test;

// ---- focused cases -------------------------------------------------------------

namespace {

// Two servers, two devices each, everything as HCCL writes it.
Json two_servers() {
  return Json::parse(R"({
    "version": "1.0", "server_count": "2", "status": "completed",
    "server_list": [
      {"server_id": "10.0.0.11", "device": [
        {"device_id": "0", "device_ip": "192.1.11.10", "rank_id": "0"},
        {"device_id": "1", "device_ip": "192.2.11.10", "rank_id": "1"}]},
      {"server_id": "10.0.0.12", "device": [
        {"device_id": "0", "device_ip": "192.1.12.10", "rank_id": "2"},
        {"device_id": "1", "device_ip": "192.2.12.10", "rank_id": "3"}]}]})");
}

// The text of `doc` with `key` written a second time, last, in the object at
// `object` (a Json cannot hold a repeated key; the text can).
std::string with_repeated_key(Json doc, const std::string& object, const std::string& key, const Json& value) {
  doc[at(object)]["@repeat@"] = value;
  std::string text = doc.dump();
  const std::string placeholder = "\"@repeat@\"";
  return text.replace(text.find(placeholder), placeholder.size(), Json(key).dump());
}

}  // namespace

TEST_CASE("a valid table is read into servers and devices in file order", "[rank_table]") {
  Json doc = two_servers();
  doc[at("/server_list/1/device")] = Json::parse(R"([
      {"device_id": "7", "device_ip": "192.1.12.10", "rank_id": "3"},
      {"device_id": "5", "device_ip": "::ffff:10.0.0.1", "rank_id": "2"}])");
  doc[at("/server_list/1/host_ip")] = "10.1.0.12";
  doc[at("/server_list/1/container_ip")] = "172.17.0.3";
  const RankTable table = parse_rank_table(doc.dump(), "t.json");
  CHECK(table.status == "completed");
  CHECK(table.world_size == 4);
  REQUIRE(table.servers.size() == 2);
  const auto& second = table.servers[1];
  CHECK(second.server_id == "10.0.0.12");
  CHECK(second.rank_start == 2);
  CHECK(second.host_ip == some("10.1.0.12"));
  CHECK(second.container_ip == some("172.17.0.3"));
  CHECK_FALSE(table.servers[0].host_ip.has_value());
  REQUIRE(second.devices.size() == 2);
  CHECK(second.devices[0].device_id == 7);
  CHECK(second.devices[0].rank_id == 3);
  CHECK(second.devices[1].device_ip == some("::ffff:10.0.0.1"));
}

TEST_CASE("integers and decimal strings are read alike", "[rank_table]") {
  Json doc = two_servers();
  doc["server_count"] = 2;
  doc[at("/server_list/1/device/1/rank_id")] = 3;
  doc[at("/server_list/1/device/1/device_id")] = 1;
  const RankTable table = parse_rank_table(doc.dump(), "t.json");
  CHECK(table.servers[1].devices[1].rank_id == 3);
  CHECK(table.servers[1].devices[1].device_id == 1);
}

TEST_CASE("status defaults to completed and is kept when given", "[rank_table]") {
  Json doc = two_servers();
  doc.erase("status");
  CHECK(parse_rank_table(doc.dump(), "t.json").status == "completed");
  doc["status"] = "initializing";
  CHECK(parse_rank_table(doc.dump(), "t.json").status == "initializing");
  doc["status"] = 1;
  const auto e = doc_error(doc);
  CHECK(e.kind() == Kind::shape);
  CHECK(e.pointer() == some("/status"));
}

TEST_CASE("unknown fields are ignored at every level", "[rank_table]") {
  Json doc = two_servers();
  doc["vendor"] = Json::parse(R"({"deep": [[[1, {"x": null}]]]})");
  doc[at("/server_list/0/host_nic_ip")] = "reserve";
  doc[at("/server_list/0/device/0/device_port")] = 16666;
  doc[at("/server_list/0/device/0/super_device_id")] = "x";
  CHECK(parse_rank_table(doc.dump(), "t.json").world_size == 4);
}

TEST_CASE("a UTF-8 byte order mark is skipped", "[rank_table]") {
  CHECK(parse_rank_table("\xEF\xBB\xBF" + two_servers().dump(), "t.json").world_size == 4);
  // Only one, and only at the start.
  CHECK(parse_error("\xEF\xBB\xBF\xEF\xBB\xBF" + two_servers().dump()).kind() == Kind::syntax);
  CHECK(parse_error(" \xEF\xBB\xBF" + two_servers().dump()).kind() == Kind::syntax);
}

TEST_CASE("an empty or blank file is reported as empty", "[rank_table]") {
  for (const std::string text : {"", "   ", "\n\r\n\t ", "\xEF\xBB\xBF", "\xEF\xBB\xBF \n"}) {
    CAPTURE(text);
    const auto e = parse_error(text);
    CHECK(e.kind() == Kind::empty);
    CHECK(e.detail() == "empty file");
    CHECK_FALSE(e.pointer().has_value());
  }
}

TEST_CASE("a syntax error names line, column and byte", "[rank_table]") {
  const std::string text = "{\n  \"version\": \"1.0\",\n  oops\n}";
  const std::size_t byte = text.find("oops");
  auto e = parse_error(text);
  CHECK(e.kind() == Kind::syntax);
  CHECK_FALSE(e.pointer().has_value());
  CHECK_THAT(e.detail(),
             Contains("not valid JSON at line 3, column 3 (byte " + std::to_string(byte) + "): invalid literal"));
  CHECK_THAT(e.detail(), !Contains("last read"));

  // The byte offset is in the file, BOM included; lines and columns ignore it.
  e = parse_error("\xEF\xBB\xBF" + text);
  CHECK_THAT(e.detail(), Contains("line 3, column 3 (byte " + std::to_string(byte + 3) + ")"));

  // A file cut in the middle of a write.
  e = parse_error(std::string("{\n  \"version\": \"1.0\",\n  \"server_list\": [\n"));
  CHECK(e.kind() == Kind::syntax);
  CHECK_THAT(e.detail(), Contains("line 4, column 1") && Contains("end of input"));
}

// Found by fuzzing: nlohmann throws its own out_of_range for such a number,
// which escaped parse_rank_table.
TEST_CASE("a number beyond a double's range is a syntax error at its position", "[rank_table]") {
  const std::string head =
      "{\n  \"version\": \"1.0\",\n  \"server_list\": [{\"server_id\": \"a\", \"device\": [\n"
      "    {\"device_id\": ";
  for (const std::string& number : {std::string("1e400"), std::string("-1e400"), std::string("123456789e999"),
                                    "1" + std::string(400, '0') + ".5"}) {
    CAPTURE(number);
    const std::string text = head + number + ", \"rank_id\": \"0\"}]}]}";
    auto e = parse_error(text);
    CHECK(e.kind() == Kind::syntax);
    CHECK_FALSE(e.pointer().has_value());
    const std::size_t byte = head.size();
    CHECK_THAT(e.detail(),
               Contains("not valid JSON at line 4, column 19 (byte " + std::to_string(byte) + "): number ") &&
                   Contains(" is out of range"));
    CHECK(e.detail().size() < 200);  // a long number is shortened
    // With a BOM: the byte counts it, the column does not.
    e = parse_error("\xEF\xBB\xBF" + text);
    CHECK_THAT(e.detail(), Contains("line 4, column 19 (byte " + std::to_string(byte + 3) + ")"));
  }
  // The fuzzer's input: a format 0.1 table, the number in an unknown field.
  const std::string v0 = R"({"group_list": [{"instance_list": [{"pod_name": "p-1", "server_id": "s",
    "devices": [{"device_id": "3", "device+_ip":1e392.4.21.23"}]}]}]})";
  const auto e = parse_error(v0);
  CHECK(e.kind() == Kind::syntax);
  CHECK_THAT(e.detail(), Contains("line 2, column 49") && Contains("number 1e392 is out of range"));
  // A number that overflows after an earlier syntax error: the earlier one is reported.
  CHECK_THAT(parse_error("{\"version\": tru, \"x\": 1e400}").detail(), Contains("invalid literal"));
}

// Each key costs a linear search, so a file of many keys in one object would
// take quadratic time; 256 keys are far more than any rank table object has.
TEST_CASE("an object of more than 256 keys is refused while parsing", "[rank_table]") {
  Json doc = two_servers();
  auto& device = doc[at("/server_list/1/device/0")];
  for (int i = 0; device.size() < 256; ++i) device["extra_" + std::to_string(i)] = i;
  const RankTable table = parse_doc(doc);  // unknown fields, 256 keys: read
  CHECK(table.world_size == 4);

  device["one_too_many"] = 0;
  auto e = doc_error(doc);
  CHECK(e.kind() == Kind::syntax);
  CHECK_FALSE(e.pointer().has_value());
  CHECK(e.detail() == "not a rank table: the object at /server_list/1/device/0 has more than 256 keys");

  Json top = Json::object();
  for (int i = 0; i < 300; ++i) top["k" + std::to_string(i)] = Json::object();
  e = doc_error(top);
  CHECK(e.kind() == Kind::syntax);
  CHECK(e.detail() == "not a rank table: the object at the top level has more than 256 keys");
}

TEST_CASE("a key repeated in one object is refused where it repeats", "[rank_table]") {
  Json unknown = two_servers();
  unknown[at("/server_list/0/device/0/vendor~1x")] = {{"a/b~c", 1}};
  struct Case {
    const char* where;
    Json doc;
    std::string object;  // where the key is repeated
    std::string key;
    std::string pointer;  // expected
  };
  const Case cases[] = {
      {"top level", two_servers(), "", "server_list", "/server_list"},
      {"server", two_servers(), "/server_list/1", "server_id", "/server_list/1/server_id"},
      {"device", two_servers(), "/server_list/0/device/1", "rank_id", "/server_list/0/device/1/rank_id"},
      {"0.1 device", corpus_doc("valid/v0_two_pods_out_of_order.json"), "/group_list/0/instance_list/1/devices/2",
       "device_id", "/group_list/0/instance_list/1/devices/2/device_id"},
      {"0.1 pod", corpus_doc("valid/v0_two_pods_out_of_order.json"), "/group_list/0/instance_list/0", "pod_name",
       "/group_list/0/instance_list/0/pod_name"},
      {"1.2 super pod", corpus_doc("valid/v1_2_superpod_two_pods.json"), "/super_pod_list/1", "super_pod_id",
       "/super_pod_list/1/super_pod_id"},
      {"1.2 super pod server", corpus_doc("valid/v1_2_superpod_two_pods.json"), "/super_pod_list/0/server_list/0",
       "server_id", "/super_pod_list/0/server_list/0/server_id"},
      {"unknown field, escaped", unknown, "/server_list/0/device/0/vendor~1x", "a/b~c",
       "/server_list/0/device/0/vendor~1x/a~1b~0c"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.where);
    // The same value again: only the repetition is wrong.
    const Json& value = c.doc.at(at(c.object)).at(c.key);
    const auto e = parse_error(with_repeated_key(c.doc, c.object, c.key, value));
    CHECK(e.kind() == Kind::duplicate);
    CHECK(e.pointer() == some(c.pointer));
    CHECK_THAT(e.detail(), Contains("the key " + Json(c.key).dump() + " appears twice"));
  }

  const auto e = parse_error(with_repeated_key(two_servers(), "/server_list/0/device/1", "rank_id", "5"));
  CHECK(e.detail() == R"(the key "rank_id" appears twice in the same object; a rank table must not repeat keys)");
  CHECK_THAT(std::string(e.what()), Contains("test.json: /server_list/0/device/1/rank_id: the key \"rank_id\""));

  // Indices count every element (scalars, arrays and objects) of nested arrays.
  const std::string nested = R"({"version": "1.0", "x": [1, [], {"k": 1}, [null, [{"": 1, "": 2}]]],
                                 "server_list": []})";
  CHECK(parse_error(nested).pointer() == some("/x/3/1/0/"));
}

TEST_CASE("the same key in different objects is not a repeat", "[rank_table]") {
  // Every device has a rank_id; a key may also come back in nested and sibling objects.
  Json doc = two_servers();
  doc["x"] = Json::parse(R"({"x": {"x": [{"x": 1, "y": 2}, {"y": 1, "x": 2}], "y": {"x": 3}}})");
  doc[at("/server_list/0/server_list")] = Json::parse(R"([{"server_id": "a"}])");
  // Keys equal up to a NUL byte differ.
  doc["y"] = Json::parse(R"({"a\u0000b": 1, "a\u0000c": 2, "a": 3})");
  CHECK(parse_doc(doc).world_size == 4);
}

TEST_CASE("a repeated key is found while parsing: before shape checks, after earlier syntax", "[rank_table]") {
  Json doc = two_servers();
  doc["server_count"] = "x";                            // a bad value, earlier in the document
  doc[at("/server_list/0/device/0")].erase("rank_id");  // a missing field, earlier too
  const std::string text = with_repeated_key(doc, "/server_list/1", "device", Json::array());
  CHECK(parse_error(text).kind() == Kind::duplicate);
  // A syntax error later in the text comes after it; one earlier, before.
  CHECK(parse_error(text.substr(0, text.size() - 2)).kind() == Kind::duplicate);
  const std::string early_syntax = "{\"version\": tru, " + text.substr(1);
  CHECK(parse_error(early_syntax).kind() == Kind::syntax);
}

TEST_CASE("hostile input becomes a RankTableError, never a crash", "[rank_table]") {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  CHECK_THAT(parse_error(deep).detail(), Contains("nested more than"));
  // Invalid UTF-8, and a NUL byte (which nlohmann would take for the end of input).
  CHECK(parse_error("{\"version\": \"1.0\", \"x\": \"\xFF\"}").kind() == Kind::syntax);
  CHECK(parse_error(std::string("{\"version\": \"1.0\"}") + '\0').kind() == Kind::syntax);
  for (const std::string text : {"null", "1", "\"1.0\"", "[]", "true"}) {
    CAPTURE(text);
    const auto e = parse_error(text);
    CHECK(e.kind() == Kind::shape);
    CHECK(e.pointer() == some(""));
  }
  // Every prefix and a few byte swaps of a real table: only RankTableError may come out.
  const std::string table = read_text(corpus_dir + "valid/v1_two_servers_16p.json");
  REQUIRE(table.size() > 1000);
  check_hostile_variants(table, "\"[{1-]");
}

TEST_CASE("the table integer parser takes decimal digits only", "[rank_table]") {
  // Leading zeros are accepted: "007" is decimal 7 (never octal).
  struct Case {
    const char* json;  // the device_id as written in the file
    std::optional<int> value;
    const char* says;  // for rejected ones
  };
  const Case cases[] = {
      {R"("0")", 0, ""},
      {R"("007")", 7, ""},
      {R"("1000000")", 1000000, ""},
      {"15", 15, ""},
      {"1000000", 1000000, ""},
      {R"("1000001")", std::nullopt, "out of range (at most 1000000), got \"1000001\""},
      {R"("99999999999999999999999")", std::nullopt, "out of range"},
      {"1000001", std::nullopt, "out of range (at most 1000000), got 1000001"},
      {"99999999999999999999999", std::nullopt, "out of range"},
      {R"("")", std::nullopt, "expected a non-negative decimal integer, got \"\""},
      {R"("-1")", std::nullopt, "expected a non-negative decimal integer, got \"-1\""},
      {"-1", std::nullopt, "expected a non-negative decimal integer, got -1"},
      {R"("+1")", std::nullopt, "got \"+1\""},
      {R"(" 1")", std::nullopt, "got \" 1\""},
      {R"("1 ")", std::nullopt, "got \"1 \""},
      {R"("1.0")", std::nullopt, "got \"1.0\""},
      {R"("0x1")", std::nullopt, "got \"0x1\""},
      {R"("1e3")", std::nullopt, "got \"1e3\""},
      {"1.0", std::nullopt, "expected a non-negative decimal integer, got 1.0"},
      {"1e3", std::nullopt, "expected a non-negative decimal integer"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.json);
    const std::string text = R"({"version": "1.0", "server_list": [{"server_id": "a", "device": [
                               {"rank_id": "0", "device_id": )" +
                             std::string(c.json) + "}]}]}";
    if (c.value) {
      CHECK(parse_rank_table(text, "t.json").servers[0].devices[0].device_id == *c.value);
    } else {
      const auto e = parse_error(text);
      CHECK(e.kind() == Kind::bad_value);
      CHECK(e.pointer() == some("/server_list/0/device/0/device_id"));
      CHECK_THAT(e.detail(), Contains(c.says));
    }
  }
  // Other JSON types are shape errors.
  for (const char* json : {"true", "null", "[]", "{}"}) {
    CAPTURE(json);
    const std::string text = R"({"version": "1.0", "server_list": [{"server_id": "a", "device": [
                               {"rank_id": "0", "device_id": )" +
                             std::string(json) + "}]}]}";
    CHECK(parse_error(text).kind() == Kind::shape);
  }
}

TEST_CASE("version: 1.0, 1.2 and 2.0 are read, 0.1 is recognised by group_list", "[rank_table]") {
  Json doc = two_servers();
  doc["version"] = "7.3";
  auto e = doc_error(doc);
  CHECK(e.kind() == Kind::unsupported);
  CHECK(e.pointer() == some("/version"));
  CHECK(e.detail() == R"(unsupported rank table version "7.3" (supported: "1.0", "1.2", "2.0", and )"
                      "format 0.1, which has no version)");

  doc["version"] = 1.0;
  CHECK(doc_error(doc).kind() == Kind::shape);

  doc.erase("version");
  e = doc_error(doc);
  CHECK(e.kind() == Kind::missing);
  CHECK(e.pointer() == some("/version"));
  CHECK_THAT(e.detail(), Contains("group_list"));

  // The version decides: group_list beside it is an unknown field.
  doc["version"] = "1.0";
  doc["group_list"] = "ignored";
  CHECK(parse_rank_table(doc.dump(), "t.json").format == RankTableFormat::v1_0);
  doc.erase("version");
  CHECK(doc_error(doc).pointer() == some("/group_list"));  // now a 0.1 table, and a bad one
}

TEST_CASE("messages name what is wrong", "[rank_table]") {
  Json doc = two_servers();
  SECTION("duplicate rank, at its second occurrence") {
    doc[at("/server_list/1/device/0/rank_id")] = "1";
    const auto e = doc_error(doc);
    CHECK(e.kind() == Kind::duplicate);
    CHECK(e.pointer() == some("/server_list/1/device/0/rank_id"));
    CHECK(e.detail() == "rank 1 appears twice (also at /server_list/0/device/1/rank_id)");
    CHECK_THAT(std::string(e.what()), Contains("test.json: /server_list/1/device/0/rank_id: rank 1 appears twice"));
  }
  SECTION("duplicate device_ip, compared as addresses") {
    doc[at("/server_list/0/device/0/device_ip")] = "fe80::1";
    doc[at("/server_list/1/device/1/device_ip")] = "fe80:0::0:1";
    const auto e = doc_error(doc);
    CHECK(e.kind() == Kind::duplicate);
    CHECK(e.pointer() == some("/server_list/1/device/1/device_ip"));
    CHECK_THAT(e.detail(), Contains("\"fe80:0::0:1\" appears twice"));
  }
  SECTION("ranks not 0..N-1") {
    doc[at("/server_list/1/device/0/rank_id")] = "9";
    doc[at("/server_list/1/device/1/rank_id")] = "7";
    const auto e = doc_error(doc);
    CHECK(e.kind() == Kind::inconsistent);
    CHECK_FALSE(e.pointer().has_value());
    CHECK(e.detail() ==
          "rank ids must be exactly 0..3 (one per device); ranks 2 and 3 are missing and 7 and "
          "9 are out of range");
  }
  SECTION("interleaved servers") {
    doc[at("/server_list/0/device/1/rank_id")] = "2";
    doc[at("/server_list/1/device/0/rank_id")] = "1";
    const auto e = doc_error(doc);
    CHECK(e.kind() == Kind::inconsistent);
    CHECK_THAT(e.detail(), Contains("each server's ranks must form one contiguous block "
                                    "(server 10.0.0.11 holds 0 and 2"));
  }
  SECTION("server_count") {
    doc["server_count"] = "3";
    const auto e = doc_error(doc);
    CHECK(e.kind() == Kind::inconsistent);
    CHECK(e.pointer() == some("/server_count"));
    CHECK(e.detail() == "server_count is 3 but server_list has 2 entries");
  }
  SECTION("device_ip: placeholder, malformed, required on several servers") {
    doc[at("/server_list/1/device/1/device_ip")] = "-.-.-.-";
    CHECK_THAT(doc_error(doc).detail(), Contains("\"-.-.-.-\" is not an IP address (the placeholder"));
    // inet_pton would stop at the NUL.
    doc[at("/server_list/1/device/1/device_ip")] = std::string("10.0.0.1\0x", 10);
    CHECK_THAT(doc_error(doc).detail(), Contains("is not an IP address"));
    doc[at("/server_list/1/device/1")].erase("device_ip");
    const auto e = doc_error(doc);
    CHECK(e.kind() == Kind::missing);
    CHECK(e.pointer() == some("/server_list/1/device/1/device_ip"));
    CHECK(e.detail() == "device_ip is required when the table has more than one server");
  }
  SECTION("server_id: empty, too long, repeated") {
    doc[at("/server_list/1/server_id")] = "";
    CHECK(doc_error(doc).kind() == Kind::bad_value);
    doc[at("/server_list/1/server_id")] = std::string(65, 'a');
    CHECK_THAT(doc_error(doc).detail(), Contains("longer than 64"));
    doc[at("/server_list/1/server_id")] = std::string(64, 'a');
    CHECK_NOTHROW(parse_rank_table(doc.dump(), "t.json"));
    doc[at("/server_list/1/server_id")] = "10.0.0.11";
    const auto e = doc_error(doc);
    CHECK(e.kind() == Kind::duplicate);
    CHECK(e.detail() == "server 10.0.0.11 listed twice (also at /server_list/0/server_id)");
  }
  SECTION("no devices, no servers") {
    doc[at("/server_list/1/device")] = Json::array();
    auto e = doc_error(doc);
    CHECK(e.pointer() == some("/server_list/1/device"));
    CHECK(e.detail() == "server 10.0.0.12 has no devices");
    doc["server_list"] = Json::array();
    e = doc_error(doc);
    CHECK(e.pointer() == some("/server_list"));
  }
}

TEST_CASE("several problems: the first by precedence is reported", "[rank_table]") {
  Json doc = two_servers();
  SECTION("element checks come before uniqueness, whatever the order in the file") {
    doc[at("/server_list/0/device/1/rank_id")] = "0";    // duplicate, early
    doc[at("/server_list/1/device/1/device_id")] = "x";  // bad value, later
    CHECK(doc_error(doc).pointer() == some("/server_list/1/device/1/device_id"));
  }
  SECTION("element checks follow document order") {
    doc[at("/server_list/1/device/0/rank_id")] = "x";
    doc[at("/server_list/0/device/1/device_ip")] = "nope";
    CHECK(doc_error(doc).pointer() == some("/server_list/0/device/1/device_ip"));
    // server_count comes first in this document.
    doc["server_count"] = "-2";
    CHECK(doc_error(doc).pointer() == some("/server_count"));
  }
  SECTION("uniqueness: server_id, device_id, rank_id, device_ip") {
    doc[at("/server_list/1/device/1/device_ip")] = "192.1.11.10";  // device_ip
    doc[at("/server_list/1/device/1/rank_id")] = "2";              // rank_id
    CHECK_THAT(doc_error(doc).detail(), Contains("rank 2 appears twice"));
    doc[at("/server_list/1/device/1/device_id")] = "0";  // device_id
    CHECK_THAT(doc_error(doc).detail(), Contains("device 0 listed twice on server 10.0.0.12"));
    doc[at("/server_list/1/server_id")] = "10.0.0.11";  // server_id
    CHECK_THAT(doc_error(doc).detail(), Contains("server 10.0.0.11 listed twice"));
  }
  SECTION("table-wide: numbering, then blocks, then server_count") {
    doc["server_count"] = "5";
    CHECK_THAT(doc_error(doc).detail(), Contains("server_count is 5"));
    doc[at("/server_list/0/device/1/rank_id")] = "2";
    doc[at("/server_list/1/device/0/rank_id")] = "1";
    CHECK_THAT(doc_error(doc).detail(), Contains("contiguous block"));
    doc[at("/server_list/1/device/0/rank_id")] = "4";
    CHECK_THAT(doc_error(doc).detail(), Contains("rank 1 is missing and 4 is out of range"));
  }
  SECTION("a required field is reported before the members of its object") {
    doc[at("/server_list/0/device/0")].erase("rank_id");
    doc[at("/server_list/0/device/0/device_id")] = "x";
    CHECK(doc_error(doc).pointer() == some("/server_list/0/device/0/rank_id"));
  }
}

TEST_CASE("load_rank_table reads files and reports I/O errors with the path", "[rank_table]") {
  const std::string valid = corpus_dir + "valid/v1_two_servers_16p.json";
  CHECK(load_rank_table(valid).world_size == 16);

  const std::string missing = corpus_dir + "no_such_table.json";
  auto e = error_of([&] { load_rank_table(missing); });
  CHECK(e.kind() == Kind::io);
  CHECK(e.source() == missing);
  CHECK_THAT(std::string(e.what()), Contains(missing) && Contains("No such file or directory"));

  e = error_of([&] { load_rank_table(corpus_dir + "valid"); });
  CHECK(e.kind() == Kind::io);
  CHECK_THAT(std::string(e.what()), Contains(corpus_dir + "valid") && Contains("Is a directory"));

  e = error_of([&] { load_rank_table("/dev/null"); });
  CHECK(e.kind() == Kind::io);
  CHECK_THAT(e.detail(), Contains("not a regular file"));

  e = error_of([&] { load_rank_table(corpus_dir + "invalid/empty_file.json"); });
  CHECK(e.kind() == Kind::empty);
  CHECK(e.source() == corpus_dir + "invalid/empty_file.json");
}
