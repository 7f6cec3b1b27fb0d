// The shared rank table corpus (tests/data/rank_tables/MANIFEST.json) and the
// format 2.0 one beside it (tests/data/rank_tables_2_0), checked under the
// rules of their "_about": every entry gives exactly its outcome.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "davincirun/errors.hpp"
#include "davincirun/rank_table.hpp"
#include "davincirun/rank_table_loader.hpp"
#include "test_rank_table_support.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using davincirun::load_rank_table;
using davincirun::LoadedRankTable;
using davincirun::parse_rank_table;
using davincirun::RankTable;
using davincirun::RankTableError;
using davincirun::RankTableFormat;
using davincirun::RankTableLoadOptions;
using davincirun::wait_for_rank_table;
using Kind = RankTableError::Kind;
using namespace rank_table_test;

namespace {

// ---- the corpus --------------------------------------------------------------

// "valid" and "error" entries are loaded with waiting off, "timeout" ones with a 1 s wait.
LoadedRankTable load_once(const std::string& path) {
  RankTableLoadOptions no_wait;
  no_wait.wait_timeout = std::chrono::milliseconds(0);
  return wait_for_rank_table(path, no_wait);
}

// What a message must name for the value at `pointer` of the file: a string's
// text or a number's JSON. Empty when nothing is there (a missing field) or the
// value is a container.
std::string offending_value(const std::string& path, const std::string& pointer) {
  const Json doc = Json::parse(read_text(path), nullptr, false);
  const Json::json_pointer at(pointer);
  if (doc.is_discarded() || !doc.contains(at)) return "";
  const Json& value = doc.at(at);
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number()) return value.dump();
  return "";
}

// Servers, devices and ranks alike (what HCCL reads); pod names and formats aside.
void check_same_layout(const RankTable& actual, const RankTable& expected) {
  CHECK(actual.world_size == expected.world_size);
  REQUIRE(actual.servers.size() == expected.servers.size());
  for (std::size_t i = 0; i < actual.servers.size(); ++i) {
    const auto& a = actual.servers[i];
    const auto& e = expected.servers[i];
    CAPTURE(i);
    CHECK(a.server_id == e.server_id);
    CHECK(a.rank_start == e.rank_start);
    REQUIRE(a.devices.size() == e.devices.size());
    for (std::size_t j = 0; j < a.devices.size(); ++j) {
      CAPTURE(j);
      CHECK(a.devices[j].device_id == e.devices[j].device_id);
      CHECK(a.devices[j].rank_id == e.devices[j].rank_id);
      CHECK(a.devices[j].device_ip == e.devices[j].device_ip);
      CHECK(a.devices[j].super_device_id == e.devices[j].super_device_id);
      CHECK(a.devices[j].local_id == e.devices[j].local_id);
    }
  }
}

// The format of the copy for the ranks: 1.x and 2.0 stay, 0.1 becomes 1.0.
RankTableFormat normalized_format(RankTableFormat read) {
  return read == RankTableFormat::v0_1 ? RankTableFormat::v1_0 : read;
}

void check_valid_entry(const std::string& dir, const std::string& path, const Json& entry) {
  LoadedRankTable loaded;
  try {
    loaded = load_once(path);
  } catch (const RankTableError& e) {
    FAIL_CHECK("unexpected error: " << e.what());
    return;
  }
  const RankTable& table = loaded.table;
  CHECK(loaded.path == std::filesystem::canonical(path).string());
  CHECK(std::string(to_string(table.format)) == entry.at("format").get<std::string>());
  CHECK(table.servers.size() == entry.at("servers").get<std::size_t>());
  CHECK(table.world_size == entry.at("world_size").get<int>());
  CHECK(table.warnings.empty());
  std::map<std::string, int> starts;
  for (const auto& server : table.servers) starts[server.server_id] = server.rank_start;
  CHECK(starts.size() == entry.at("rank_start").size());
  for (const auto& [server_id, start] : entry.at("rank_start").items()) {
    CAPTURE(server_id);
    REQUIRE(starts.count(server_id) == 1);
    CHECK(starts[server_id] == start.get<int>());
  }
  if (entry.contains("converted_v1")) {
    // The conversion gives the expected 1.0 table, in the RankTable and in the copy for the ranks.
    const std::string expected_path = dir + entry.at("converted_v1").get<std::string>();
    check_same_layout(table, load_rank_table(expected_path));
    CHECK(Json::parse(table.normalized_json) == Json::parse(read_text(expected_path)));
  }
  // The copy for the ranks reads back as the same table, in its format.
  const RankTable copy = parse_rank_table(table.normalized_json, "normalized");
  check_same_layout(copy, table);
  CHECK(copy.format == normalized_format(table.format));
  if (entry.contains("kept")) {
    const Json original = Json::parse(read_text(path));
    const Json normalized = Json::parse(table.normalized_json);
    for (const auto& pointer : entry.at("kept")) {
      CAPTURE(pointer);
      const auto at = Json::json_pointer(pointer.get<std::string>());
      REQUIRE(normalized.contains(at));
      CHECK(normalized.at(at) == original.at(at));
    }
  }
}

void check_error_entry(const std::string& path, const Json& entry) {
  std::optional<RankTableError> error;
  try {
    load_once(path);
  } catch (const RankTableError& e) {
    error = e;
  }
  if (!error) {
    FAIL_CHECK("loaded without error");
    return;
  }
  INFO("message: " << error->what());
  CHECK(error->kind() != Kind::io);
  CHECK(error->source() == path);
  if (entry.contains("pointer")) {
    const std::string expected = entry.at("pointer").get<std::string>();
    CHECK(error->pointer().has_value());  // nullopt never matches a listed pointer, not even ""
    CHECK(error->pointer().value_or("<no pointer>") == expected);
    const std::string value = offending_value(path, expected);
    if (!value.empty()) CHECK_THAT(error->detail(), Contains(value));
  }
}

void check_timeout_entry(const std::string& path) {
  RankTableLoadOptions wait;
  wait.wait_timeout = std::chrono::seconds(1);
  wait.retry_interval = std::chrono::milliseconds(100);
  const auto start = std::chrono::steady_clock::now();
  const auto e = error_of([&] { wait_for_rank_table(path, wait); });
  const auto elapsed = std::chrono::steady_clock::now() - start;
  INFO("message: " << e.what());
  CHECK(elapsed >= std::chrono::seconds(1));
  CHECK(elapsed < std::chrono::seconds(5));
  CHECK(e.source() == path);
  CHECK_THAT(e.detail(), StartsWith("timed out after 1 s waiting for the rank table: "));
  CHECK_THAT(e.detail(), Contains("its status is still 'initializing'"));
  // With waiting off, the table is returned as it is: the caller decides.
  CHECK(load_once(path).table.status == "initializing");
}

// Checks every entry of `dir`/MANIFEST.json; the number of each outcome.
std::map<std::string, std::size_t> check_corpus(const std::string& dir) {
  const Json manifest = Json::parse(read_text(dir + "MANIFEST.json"));
  REQUIRE(manifest.contains("_about"));
  std::map<std::string, std::size_t> checked;
  for (const auto& [name, entry] : manifest.items()) {
    if (name == "_about") continue;
    INFO("corpus file: " << name);
    const std::string outcome = entry.at("outcome").get<std::string>();
    if (outcome == "valid") {
      check_valid_entry(dir, dir + name, entry);
    } else if (outcome == "timeout") {
      check_timeout_entry(dir + name);
    } else {
      CHECK(outcome == "error");
      check_error_entry(dir + name, entry);
    }
    ++checked[outcome];
  }
  return checked;
}

void check_every_file_listed(const std::string& corpus) {
  const Json manifest = Json::parse(read_text(corpus + "MANIFEST.json"));
  for (const char* dir : {"valid", "invalid"}) {
    for (const auto& file : std::filesystem::directory_iterator(corpus + dir)) {
      const std::string name = std::string(dir) + "/" + file.path().filename().string();
      CAPTURE(name);
      CHECK(manifest.contains(name));
    }
  }
}

}  // namespace

TEST_CASE("every corpus table loads as MANIFEST.json says", "[rank_table]") {
  auto checked = check_corpus(corpus_dir);
  CHECK(checked["valid"] >= 13);
  CHECK(checked["error"] >= 20);
  CHECK(checked["timeout"] >= 1);
}

TEST_CASE("every 2.0 corpus table loads as its MANIFEST.json says", "[rank_table][v2]") {
  auto checked = check_corpus(corpus_v2_dir);
  CHECK(checked["valid"] >= 6);
  CHECK(checked["error"] >= 9);
}

TEST_CASE("every corpus file has a MANIFEST.json entry", "[rank_table]") {
  check_every_file_listed(corpus_dir);
  check_every_file_listed(corpus_v2_dir);
}
