// The fast reader of 1.x tables (rank_table_v1_fast.cpp) against the thorough
// one: on every table of the corpora and on texts made to reach each of its
// branches, the same table, normalized text and warnings, or the same error;
// and it does read what it is for (plain 1.0 and 1.2 tables, large ones on two
// threads) rather than always handing over.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "rank_table/rank_table_checker.hpp"
#include "rank_table_fingerprint.hpp"
#include "test_rank_table_support.hpp"

using davincirun::parse_rank_table;
using davincirun::RankTable;
using namespace rank_table_test;
using namespace std::string_literals;

namespace {

std::string fast_outcome(const std::string& text) {
  return outcome([&] { return parse_rank_table(text, "t.json"); });
}

std::string thorough_outcome(const std::string& text) {
  return outcome([&] { return davincirun::detail::parse_table_thoroughly(text, "t.json"); });
}

// Whether the fast reader took the text itself (rather than handing it over).
bool read_fast(const std::string& text) {
  const std::string source = "t.json";
  davincirun::detail::Checker checker(source);
  try {
    return checker.read_v1_fast(text, false).has_value();
  } catch (const davincirun::RankTableError&) {
    return true;  // a table-wide rule's error, given as the thorough reader gives it
  }
}

std::string two_servers(const std::string& extra_device_field = "", const std::string& extra_top_field = "") {
  return fmt::format(R"({{"version": "1.0", "server_count": "2",{} "server_list": [
    {{"server_id": "10.0.0.1", "device": [{{"device_id": "0", "device_ip": "192.168.0.1", "rank_id": "0"{}}}]}},
    {{"server_id": "10.0.0.2", "device": [{{"device_id": "0", "device_ip": "192.168.0.2", "rank_id": "1"}}]}}],
    "status": "completed"}})",
                     extra_top_field, extra_device_field);
}

}  // namespace

TEST_CASE("the fast reader agrees with the thorough one on every table of the corpora", "[rank_table][fast]") {
  std::size_t files = 0;
  std::size_t fast = 0;
  for (const std::string& dir : {corpus_dir, corpus_v2_dir}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
      if (entry.path().extension() != ".json") continue;
      const std::string text = read_text(entry.path().string());
      INFO(entry.path().string());
      CHECK(fast_outcome(text) == thorough_outcome(text));
      ++files;
      if (read_fast(text)) ++fast;
    }
  }
  CHECK(files > 30);
  CHECK(fast > 5);  // the plain 1.x tables among them
}

TEST_CASE("the fast reader reads plain 1.0 and 1.2 tables itself, alike", "[rank_table][fast]") {
  const std::vector<std::string> plain = {
      two_servers(),
      // Integers as JSON integers, leading zeros in strings, no status nor server_count.
      R"({"version": "1.0", "server_list": [{"server_id": "a", "device": [{"device_id": 3, "rank_id": "000"}]}]})",
      // Unknown fields of every kind, escapes, UTF-8, empty containers.
      two_servers(
          R"(, "x": {"a": [1, -2, 18446744073709551615, true, false, null, [], {}], "b": "t\u00e9\t\"\\\/\u0001"})",
          R"( "note": "服务器 \ud83d\ude80", "empty": {}, "list": [[]],)"),
      // server_count before version; host_ip and container_ip.
      R"({"server_count": "1", "version": "1.0", "server_list": [{"server_id": "s", "host_ip": "1.2.3.4",
          "container_ip": "5.6.7.8", "device": [{"device_id": "0", "rank_id": "0"}]}]})",
      // 1.2 with super pods, an integer super_pod_id.
      R"({"version": "1.2", "server_count": "2", "server_list": [
          {"server_id": "10.0.0.1", "device": [{"device_id": "0", "device_ip": "::1", "super_device_id": "7", "rank_id": "0"}]},
          {"server_id": "10.0.0.2", "device": [{"device_id": "0", "device_ip": "::2", "super_device_id": 8, "rank_id": "1"}]}],
          "super_pod_list": [{"super_pod_id": 0, "server_list": [{"server_id": "10.0.0.1"}, {"server_id": "10.0.0.2"}]}],
          "status": "completed"})",
      // A 1.0 table ignores super_pod_list and super_device_id, whatever they hold.
      two_servers(R"(, "super_device_id": [1.5])", R"( "super_pod_list": 2.5,)"),
  };
  for (const auto& text : plain) {
    INFO(text);
    CHECK(fast_outcome(text) == thorough_outcome(text));
    // Not the two listed as floating point (handed over, as said below).
    if (text.find(".5") == std::string::npos) CHECK(read_fast(text));
  }
}

TEST_CASE("what the fast reader hands over gets the thorough reader's words", "[rank_table][fast]") {
  const std::vector<std::string> handed_over = {
      two_servers(R"(, "rank_id": "0")"),              // a repeated key
      two_servers(R"(, "device_ip": "192.168.0.3")"),  // ...with an address each time
      two_servers(R"(, "x": 1.5)"),                    // floating point
      two_servers(R"(, "x": 1e3)"),                    //
      two_servers("", R"( "deep": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],)"),  // 33 levels
      R"({"version": "1.0", "server_list": [{"server_id": "a", "device": [{"device_id": "0", "device_ip": "-.-.-.-",
          "rank_id": "0"}]}]})",                   // the placeholder: a warning
      two_servers(R"(, "device_ip": "-.-.-.-")"),  // ...or an error, by the key repeat first
      R"({"version": "2.0", "rank_list": []})",    // other formats
      R"({"group_list": []})",
      R"({"version": 1.0})",
      R"([1, 2])",
      "{\"version\": \"1.0\"\x00}"s,
      two_servers() + " x",                                     // not JSON
      two_servers().substr(0, 80),                              // unfinished
      two_servers(R"(, "x": 123456789012345678901234567890)"),  // beyond 64 bits
      R"({"version": "1.0", "server_list": [{"server_id": "a", "device": [{"device_id": "0", "rank_id": "-1"}]}]})",
      R"({"version": "1.0", "server_list": [{"server_id": "", "device": [{"device_id": "0", "rank_id": "0"}]}]})",
      R"({"version": "1.0", "server_list": [{"server_id": "a", "device": []}]})",
      R"({"version": "1.0", "server_list": []})",
      R"({"version": "1.0", "server_list": [{"server_id": "a", "device": [{"device_id": "0", "rank_id": "1000001"}]}]})",
      R"({"version": "1.0", "server_list": [{"server_id": "a", "device": [{"device_id": "0", "device_ip": "1.2.3.4%eth0",
          "rank_id": "0"}]}]})",
      R"({"version": "1.2", "server_list": [{"server_id": "a", "device": [{"device_id": "0", "rank_id": "0"}]}]})",
  };
  for (const auto& text : handed_over) {
    INFO(text);
    CHECK_FALSE(read_fast(text));
    CHECK(fast_outcome(text) == thorough_outcome(text));
  }
  // The table-wide rules are shared: the fast reader throws what the thorough one does.
  const std::vector<std::string> broken_rules = {
      R"({"version": "1.0", "server_count": "3", "server_list": [{"server_id": "a", "device": [{"device_id": "0", "rank_id": "0"}]}]})",
      R"({"version": "1.0", "server_list": [{"server_id": "a", "device": [{"device_id": "0", "rank_id": "1"}]}]})",
      R"({"version": "1.0", "server_list": [
          {"server_id": "a", "device": [{"device_id": "0", "device_ip": "1.1.1.1", "rank_id": "0"}]},
          {"server_id": "b", "device": [{"device_id": "0", "device_ip": "1.1.1.2", "rank_id": "0"}]}]})",
  };
  for (const auto& text : broken_rules) {
    INFO(text);
    CHECK(fast_outcome(text) == thorough_outcome(text));
    CHECK(fast_outcome(text).rfind("error ", 0) == 0);
  }
}

TEST_CASE("a large table is read fast, on two threads, as the thorough reader reads it", "[rank_table][fast]") {
  // 1,024 servers of 16 devices: 2 MB of text, past the size the writer gets a thread at.
  Json list = Json::array();
  for (int s = 0; s < 1024; ++s) {
    Json devices = Json::array();
    for (int d = 0; d < 16; ++d) {
      const int rank = s * 16 + d;
      devices.push_back({{"device_id", std::to_string(d)},
                         {"device_ip", fmt::format("172.16.{}.{}", rank >> 8, rank & 255)},
                         {"rank_id", std::to_string(rank)}});
    }
    list.push_back({{"server_id", fmt::format("10.0.{}.{}", s >> 8, s & 255)}, {"device", std::move(devices)}});
  }
  const Json doc = {{"version", "1.0"}, {"server_count", "1024"}, {"server_list", std::move(list)}};
  const std::string text = doc.dump(2);
  REQUIRE(text.size() > (std::size_t{1} << 20));
  CHECK(read_fast(text));
  CHECK(fast_outcome(text) == thorough_outcome(text));                  // the normalized text's hash included
  CHECK(parse_rank_table(text, "t.json").normalized_hash.has_value());  // hashed beside the rules
  // A repeat found by the rules while the writer runs beside them.
  Json repeated = doc;
  repeated["server_list"][1000]["device"][3]["device_ip"] = "172.16.0.1";
  const std::string broken = repeated.dump(2);
  CHECK(fast_outcome(broken) == thorough_outcome(broken));
  CHECK(fast_outcome(broken).find("device_ip \"172.16.0.1\" appears twice") != std::string::npos);
}
