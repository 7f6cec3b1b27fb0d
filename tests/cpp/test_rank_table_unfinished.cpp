// A file still being written against a finished file that is broken: the
// loader waits on the first (a text that stops before its JSON does) and
// reports the second at once, naming the file, line and column.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "davincirun/errors.hpp"
#include "davincirun/rank_table_loader.hpp"
#include "rank_table/rank_table_checker.hpp"
#include "test_rank_table_support.hpp"
#include "test_support.hpp"

using Catch::Matchers::Contains;
using davincirun::RankTableError;
using davincirun::RankTableLoadOptions;
using davincirun::wait_for_rank_table;
using davincirun::detail::parse_table_text;
using davincirun::detail::UnfinishedJson;
using davincirun_test::Joined;
using davincirun_test::TempDir;
using davincirun_test::write_file;
using Kind = RankTableError::Kind;
using namespace rank_table_test;
using namespace std::chrono_literals;

namespace {

const std::string good_table = read_text(corpus_dir + "valid/v1_two_servers_16p.json");

// A long wait: a test that waited it out would fail by its own deadline.
RankTableLoadOptions long_wait() {
  RankTableLoadOptions options;
  options.wait_timeout = 60s;
  options.retry_interval = 20ms;
  return options;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// "unfinished", "empty", "broken" (another RankTableError) or "valid".
std::string verdict(const std::string& text) {
  try {
    parse_table_text(text, "t.json");
    return "valid";
  } catch (const UnfinishedJson&) {
    return "unfinished";
  } catch (const RankTableError& e) {
    return e.kind() == Kind::empty ? "empty" : "broken";
  }
}

// Whether `load` throws the loader's internal UnfinishedJson rather than
// the public RankTableError (error_of would slice it).
template <typename Load>
bool throws_internal_type(Load&& load) {
  try {
    load();
  } catch (const UnfinishedJson&) {
    return true;
  } catch (const RankTableError&) {
    return false;
  }
  FAIL("expected a RankTableError");
  return false;
}

// Appends `text` to the file at `path` (as a writer that has not finished does).
void append(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  REQUIRE(fd >= 0);
  CHECK(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  ::close(fd);
}

}  // namespace

TEST_CASE("every proper prefix of a table is unfinished, NUL bytes at its end too", "[rank_table]") {
  // Multi-line, one line, a BOM, format 0.1, non-ASCII text and escapes.
  std::vector<std::string> texts;
  for (const char* name : {"valid/v1_two_servers_16p.json", "valid/v1_compact_one_line.json", "valid/v1_utf8_bom.json",
                           "valid/v0_two_pods_out_of_order.json"}) {
    texts.push_back(read_text(corpus_dir + name));
  }
  texts.push_back(R"({"version": "1.0", "note": "\u00e9t\u00e9 \"x\" 中文", "server_list": [{"server_id": "a",)"
                  R"( "device": [{"device_id": 0, "rank_id": 0, "weight": -1.5e-3, "ok": true, "n": null}]}]})");
  for (const std::string& text : texts) {
    REQUIRE(verdict(text) == "valid");
    for (std::size_t n = 0; n < text.size(); ++n) {
      CAPTURE(text.substr(0, n));
      const std::string prefix = text.substr(0, n);
      const std::size_t bom = prefix.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;
      const bool blank = prefix.find_first_not_of(" \t\r\n", bom) == std::string::npos;
      const std::string expected = blank ? "empty" : "unfinished";
      CHECK(verdict(prefix) == expected);
      if (expected == "unfinished") CHECK(verdict(prefix + std::string(16, '\0')) == "unfinished");
    }
  }
}

TEST_CASE("a text broken before its end is not unfinished", "[rank_table]") {
  for (const std::string& text : std::vector<std::string>{
           R"({"version": "1.0" "server_list": [])",                               // a missing comma, then more
           R"({"version": "1.0", "server_list": []}})",                            // a complete document, then more
           R"({"version": "1.0", "server_list": []} {)",                           // a second document begun
           R"({"version": "1.0", "server_list": [tru, 1]})",                       // a broken literal mid-text
           R"({"version": "1.0", "server_count": 01)",                             // a number that cannot go on
           R"({"version": "1.0", "server_list": [],})",                            // a trailing comma
           std::string(R"({"version": "1.0", )") + '\0' + R"("server_list": [])",  // NUL, then more
       }) {
    CAPTURE(text);
    CHECK(verdict(text) == "broken");
  }
}

TEST_CASE("waiting: a finished file broken mid-text fails at once, naming file, line and column", "[rank_table]") {
  TempDir dir;
  const std::string path = dir / "hccl.json";
  // The comma after "version" forgotten by hand: the error is the next key,
  // "server_count" on line 3, reported at its last byte (nlohmann reads a
  // token whole before it can refuse it).
  std::string missing_comma = good_table;
  const std::string with_comma = "\"version\": \"1.0\",\n";
  REQUIRE(missing_comma.find(with_comma) == 4);
  missing_comma.replace(4, with_comma.size(), "\"version\": \"1.0\"\n");
  write_file(path, missing_comma);
  const auto start = std::chrono::steady_clock::now();
  const RankTableError e = error_of([&] { wait_for_rank_table(path, long_wait()); });
  CHECK(seconds_since(start) < 5);  // not the 60 s wait
  CHECK(e.kind() == Kind::syntax);
  CHECK(e.source() == path);
  CHECK_FALSE(e.pointer());
  CHECK_THAT(std::string(e.what()),
             Contains(path + ": not valid JSON at line 3, column 16 (byte 36): unexpected string literal"));

  // Complete JSON followed by more text, and complete JSON that is no table.
  for (const auto& [text, kind] : std::vector<std::pair<std::string, Kind>>{
           {good_table + "\n}\n", Kind::syntax},
           {good_table + std::string(4, '\0'), Kind::syntax},
           {R"({"version": "1.0", "status": "completed"})", Kind::missing},
           {"[]", Kind::shape},
       }) {
    CAPTURE(text);
    write_file(path, text);
    const auto again = std::chrono::steady_clock::now();
    CHECK(error_of([&] { wait_for_rank_table(path, long_wait()); }).kind() == kind);
    CHECK(seconds_since(again) < 5);
  }
}

TEST_CASE("waiting: a table written in two halves is read once whole", "[rank_table]") {
  TempDir dir;
  const std::string path = dir / "hccl.json";
  // Cut inside a string, inside a number, and just after a comma.
  for (const std::string& cut_after :
       std::vector<std::string>{"\"192.1.11", "\"rank_id\": \"1", "\"device_id\": \"3\","}) {
    CAPTURE(cut_after);
    const std::size_t cut = good_table.find(cut_after) + cut_after.size();
    write_file(path, good_table.substr(0, cut));
    std::vector<std::string> messages;
    RankTableLoadOptions options = long_wait();
    options.progress = [&](const std::string& line) { messages.push_back(line); };
    const auto start = std::chrono::steady_clock::now();
    {
      const Joined writer([&] {
        std::this_thread::sleep_for(300ms);
        append(path, good_table.substr(cut));
      });
      const auto loaded = wait_for_rank_table(path, options);
      CHECK(loaded.table.world_size == 16);
    }
    CHECK(seconds_since(start) >= 0.3);
    CHECK(seconds_since(start) < 10);
    REQUIRE_FALSE(messages.empty());
    CHECK_THAT(messages[0], Contains("it is not valid JSON yet (not valid JSON at line"));
  }
}

TEST_CASE("without waiting, an unfinished text is a plain syntax error", "[rank_table]") {
  TempDir dir;
  const std::string path = dir / "hccl.json";
  write_file(path, good_table.substr(0, 100));
  RankTableLoadOptions options;
  options.wait_timeout = 0ms;
  const RankTableError e = error_of([&] { wait_for_rank_table(path, options); });
  CHECK(e.kind() == Kind::syntax);
  CHECK_THAT(e.detail(), Contains("unexpected end of input"));
  // Callers see the public type, never the loader's internal one.
  CHECK_FALSE(throws_internal_type([&] { wait_for_rank_table(path, options); }));
  CHECK_FALSE(throws_internal_type([&] { davincirun::parse_rank_table(good_table.substr(0, 100), "t.json"); }));
  CHECK_FALSE(throws_internal_type([&] { davincirun::load_rank_table(path); }));
  CHECK(throws_internal_type([&] { parse_table_text(good_table.substr(0, 100), "t.json"); }));
}
