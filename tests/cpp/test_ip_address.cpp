// IP literals are compared one way everywhere (common/ip_address.hpp): the
// rank table's uniqueness rules and the search for this machine's server
// used to canonicalize addresses differently, so a table could pass as two
// servers and then match this machine twice.
#include <arpa/inet.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/ip_address.hpp"
#include "davincirun/environment.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/rank_table.hpp"
#include "davincirun/server_identity.hpp"
#include "test_rank_table_support.hpp"

using namespace davincirun;
using davincirun::detail::address_key;
using davincirun::detail::canonical_ip;
using rank_table_test::parse_error;

namespace {

// A 1.0 table of two servers named by `a` and `b`, one device each.
std::string two_servers(const std::string& a, const std::string& b, const std::string& ip_a = "192.168.1.1",
                        const std::string& ip_b = "192.168.1.2") {
  return R"({"version": "1.0", "server_list": [{"server_id": ")" + a +
         R"(", "device": [{"device_id": "0", "rank_id": "0", "device_ip": ")" + ip_a + R"("}]}, {"server_id": ")" + b +
         R"(", "device": [{"device_id": "0", "rank_id": "1", "device_ip": ")" + ip_b + R"("}]}]})";
}

}  // namespace

TEST_CASE("canonical_ip: one text per address, zones dropped, IPv4-mapped IPv6 is IPv4", "[ip_address]") {
  CHECK(canonical_ip("10.0.0.1") == std::optional<std::string>("10.0.0.1"));
  CHECK(canonical_ip("0:0::1") == std::optional<std::string>("::1"));
  CHECK(canonical_ip("FE80:0::1") == std::optional<std::string>("fe80::1"));
  CHECK(canonical_ip("fe80::1%eth0") == std::optional<std::string>("fe80::1"));
  CHECK(canonical_ip("::ffff:10.0.0.1") == std::optional<std::string>("10.0.0.1"));
  CHECK(canonical_ip("::FFFF:a00:1") == std::optional<std::string>("10.0.0.1"));
  // Every width of every byte, as inet_ntop writes them.
  CHECK(canonical_ip("0.9.10.99") == std::optional<std::string>("0.9.10.99"));
  CHECK(canonical_ip("100.109.210.255") == std::optional<std::string>("100.109.210.255"));
  CHECK(canonical_ip("::ffff:ff00:6400") == std::optional<std::string>("255.0.100.0"));
  for (const char* not_an_address :
       {"", "node1", "10.0.0", "10.0.0.256", "010.0.0.1", "10.0.0.1%eth0", "1.2.3.4 ", "::g"}) {
    INFO(not_an_address);
    CHECK_FALSE(canonical_ip(not_an_address));
    CHECK_FALSE(davincirun::detail::is_ip_address(not_an_address));
  }
  for (const char* address : {"10.0.0.1", "0:0::1", "fe80::1%eth0", "::ffff:10.0.0.1"}) {
    INFO(address);
    CHECK(davincirun::detail::is_ip_address(address));
  }
  CHECK_FALSE(canonical_ip(std::string("10.0.0.1\0x", 10)));  // inet_pton would stop at the NUL
  CHECK(address_key("node1.cluster") == "node1.cluster");
  CHECK(address_key("::ffff:192.168.0.9") == "192.168.0.9");
}

TEST_CASE("two server_ids naming one address are one server twice: refused, not matched twice", "[ip_address]") {
  // Before, the parser compared server ids as text and accepted this table,
  // and identify_server() then found this machine (10.0.0.1) in both servers.
  for (const auto& [a, b] :
       {std::pair<std::string, std::string>{"10.0.0.1", "::ffff:10.0.0.1"}, {"fe80::1", "FE80:0:0::1"}}) {
    INFO(a << " and " << b);
    const RankTableError e = parse_error(two_servers(a, b));
    CHECK(e.kind() == RankTableError::Kind::duplicate);
    CHECK(e.pointer() == std::optional<std::string>("/server_list/1/server_id"));
    CHECK_THAT(e.detail(), Catch::Matchers::Contains("listed twice (also at /server_list/0/server_id)"));
  }
  // Names are not addresses: compared as text.
  CHECK(parse_rank_table(two_servers("node1", "Node1"), "t.json").servers.size() == 2);
}

TEST_CASE("device_ips naming one address are duplicates, a zone is not part of a device's address", "[ip_address]") {
  const RankTableError mapped = parse_error(two_servers("a", "b", "10.1.0.1", "::ffff:10.1.0.1"));
  CHECK(mapped.kind() == RankTableError::Kind::duplicate);
  CHECK(mapped.pointer() == std::optional<std::string>("/server_list/1/device/0/device_ip"));
  const RankTableError zoned = parse_error(two_servers("a", "b", "10.1.0.1", "fe80::1%eth0"));
  CHECK(zoned.kind() == RankTableError::Kind::bad_value);
  CHECK_THAT(zoned.detail(), Catch::Matchers::Contains("is not an IP address"));
}

TEST_CASE("server matching compares a table's addresses the way the parser does", "[ip_address]") {
  const RankTable table = parse_rank_table(two_servers("::ffff:10.0.0.1", "10.0.0.2"), "t.json");
  MachineIdentity machine;
  machine.addresses = {"127.0.0.1", "10.0.0.1"};
  const ServerMatch match = identify_server(table, Environment{}, machine, std::nullopt);
  CHECK(match.index == 0);
  Environment env;
  env.set("MA_CURRENT_HOST_IP", "::FFFF:10.0.0.2");
  CHECK(identify_server(table, env, MachineIdentity{}, std::nullopt).index == 1);
}

TEST_CASE("a dotted quad is read as inet_pton reads it, without calling it", "[ip_address]") {
  // address_bytes reads texts without ':' itself: every such text must
  // get inet_pton(AF_INET)'s answer, leading zeros, 256 and stray dots included.
  std::vector<std::string> texts = {
      "0.0.0.0", "255.255.255.255", "1.2.3.4", "01.2.3.4", "1.2.3.04", "1.2.3.400",   "256.1.1.1",  "1..2.3", "1.2.3.",
      ".1.2.3",  "1.2.3.4.5",       "1.2.3",   "1.2.3.4 ", "0.0.0.00", "10.20.30.40", "1234.1.1.1", "",       "."};
  std::mt19937 random(27);  // fixed: the same texts every run
  const std::string alphabet = "0123456789.....";
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    if (i % 2 == 0) {  // any characters of a dotted quad
      const auto length = 1 + random() % 16;
      for (unsigned k = 0; k < length; ++k) text += alphabet[random() % alphabet.size()];
    } else {  // four parts of 0 to 3 digits: mostly near misses and addresses
      for (int part = 0; part < 4; ++part) {
        if (part > 0) text += '.';
        const auto length = random() % 4;
        for (unsigned k = 0; k < length; ++k) text += alphabet[random() % 10];
      }
    }
    texts.push_back(text);
  }
  int addresses = 0;
  for (const std::string& text : texts) {
    INFO(text);
    in_addr expected{};
    const bool valid = ::inet_pton(AF_INET, text.c_str(), &expected) == 1;
    const auto bytes = davincirun::detail::address_bytes(text);
    REQUIRE(bytes.has_value() == valid);
    if (!valid) continue;
    ++addresses;
    CHECK(std::memcmp(&bytes->at(12), &expected, 4) == 0);
    CHECK((bytes->at(10) == 0xff && bytes->at(11) == 0xff));
  }
  CHECK(addresses > 500);  // the random texts hit valid addresses too, not only refusals
}
