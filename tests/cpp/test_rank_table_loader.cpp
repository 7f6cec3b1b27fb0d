// Finding, waiting for and writing rank tables: wait_for_rank_table and
// write_normalized_rank_table.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "davincirun/errors.hpp"
#include "davincirun/rank_table.hpp"
#include "davincirun/rank_table_loader.hpp"
#include "test_rank_table_support.hpp"
#include "test_support.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using davincirun::parse_rank_table;
using davincirun::RankTable;
using davincirun::RankTableError;
using davincirun::RankTableLoadOptions;
using davincirun::SystemError;
using davincirun::wait_for_rank_table;
using davincirun::write_normalized_rank_table;
using davincirun_test::Joined;
using davincirun_test::TempDir;
using davincirun_test::write_file;
using Kind = RankTableError::Kind;
using namespace rank_table_test;
using namespace std::chrono_literals;

namespace {

const std::string good_table = read_text(corpus_dir + "valid/v1_two_servers_16p.json");

RankTableLoadOptions no_wait() {
  RankTableLoadOptions options;
  options.wait_timeout = 0ms;
  return options;
}

// Short waits for tests; progress messages are collected.
struct QuickWait {
  std::vector<std::string> messages;
  RankTableLoadOptions options;
  explicit QuickWait(std::chrono::milliseconds timeout) {
    options.wait_timeout = timeout;
    options.retry_interval = 20ms;
    options.progress_interval = 200ms;
    options.progress = [this](const std::string& message) { messages.push_back(message); };
  }
};

// Writes `later` to `path` after `delay`, from another thread.
Joined write_later(const std::string& path, std::string later, std::chrono::milliseconds delay) {
  return Joined([=] {
    std::this_thread::sleep_for(delay);
    write_file(path + ".tmp", later);
    std::filesystem::rename(path + ".tmp", path);
  });
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("a directory holds jobstart_hccl.json or hccl.json", "[rank_table]") {
  TempDir dir;
  auto e = error_of([&] { wait_for_rank_table(dir.path(), no_wait()); });
  CHECK(e.kind() == Kind::io);
  CHECK(e.source() == dir.path());
  CHECK_THAT(e.detail(), Contains("neither jobstart_hccl.json nor hccl.json exists"));

  // Kubernetes ConfigMaps: the file is a symlink; the path returned is the real file.
  std::filesystem::create_directory(dir / "..data");
  write_file(dir / "..data/hccl.json", good_table);
  std::filesystem::create_symlink("..data/hccl.json", dir / "hccl.json");
  auto loaded = wait_for_rank_table(dir.path() + "/", no_wait());
  CHECK(loaded.path == std::filesystem::canonical(dir / "..data/hccl.json").string());
  CHECK(loaded.table.world_size == 16);

  write_file(dir / "jobstart_hccl.json", read_text(corpus_dir + "valid/v0_two_pods_out_of_order.json"));
  loaded = wait_for_rank_table(dir.path(), no_wait());
  CHECK(loaded.path == std::filesystem::canonical(dir / "jobstart_hccl.json").string());
  CHECK(loaded.table.world_size == 8);

  // A file given directly is read as it is, whatever its name.
  loaded = wait_for_rank_table(dir / "..data/hccl.json", no_wait());
  CHECK(loaded.table.world_size == 16);
}

TEST_CASE("with waiting off, problems are reported at once", "[rank_table]") {
  TempDir dir;
  const std::string path = dir / "hccl.json";
  auto e = error_of([&] { wait_for_rank_table(path, no_wait()); });
  CHECK(e.kind() == Kind::io);
  CHECK(e.source() == path);
  CHECK_THAT(e.detail(), Contains("No such file or directory"));
  write_file(path, "{\"version\": \"1.0\", ");
  CHECK(error_of([&] { wait_for_rank_table(path, no_wait()); }).kind() == Kind::syntax);
  write_file(path, R"({"status": "initializing"})");
  CHECK(error_of([&] { wait_for_rank_table(path, no_wait()); }).kind() == Kind::missing);
  CHECK(error_of([&] { wait_for_rank_table("", no_wait()); }).kind() == Kind::io);
}

TEST_CASE("waiting: a table that is missing, empty, half-written or initializing is read again", "[rank_table]") {
  TempDir dir;
  const std::string path = dir / "hccl.json";
  std::string initializing = good_table;
  initializing.replace(initializing.find("\"completed\""), 11, "\"initializing\"");
  const std::vector<std::pair<const char*, std::string>> first_states = {
      {"it does not exist", ""},
      {"it is still empty", " \n"},
      {"it is not valid JSON yet (not valid JSON at line", good_table.substr(0, 300)},
      {"its status is still 'initializing'", initializing},
      // The operator may first write a status alone, without servers.
      {"its status is still 'initializing'", R"({"status": "initializing"})"},
  };
  for (const auto& [state, text] : first_states) {
    CAPTURE(state);
    std::filesystem::remove(path);
    if (std::string(state) != "it does not exist") write_file(path, text);
    QuickWait wait(20s);
    const auto start = std::chrono::steady_clock::now();
    {
      const Joined writer = write_later(path, good_table, 300ms);
      const auto loaded = wait_for_rank_table(path, wait.options);
      CHECK(loaded.table.status == "completed");
      CHECK(loaded.table.world_size == 16);
    }
    CHECK(seconds_since(start) < 5);
    REQUIRE_FALSE(wait.messages.empty());
    CHECK_THAT(wait.messages[0],
               StartsWith("waiting for rank table " + path + ": " + state) && Contains("; waited 0 s of 20 s; "));
  }
}

TEST_CASE("waiting: the table may appear in the directory later", "[rank_table]") {
  TempDir dir;
  QuickWait wait(20s);
  const Joined writer = write_later(dir / "jobstart_hccl.json", good_table, 200ms);
  const auto loaded = wait_for_rank_table(dir.path(), wait.options);
  CHECK(loaded.path == std::filesystem::canonical(dir / "jobstart_hccl.json").string());
  REQUIRE_FALSE(wait.messages.empty());
  CHECK_THAT(wait.messages[0], Contains("neither jobstart_hccl.json nor hccl.json exists"));
}

TEST_CASE("waiting: any other error ends the wait at once", "[rank_table]") {
  const std::string path = corpus_dir + "invalid/duplicate_rank_id.json";
  QuickWait wait(30s);
  const auto start = std::chrono::steady_clock::now();
  const auto e = error_of([&] { wait_for_rank_table(path, wait.options); });
  CHECK(e.kind() == Kind::duplicate);
  CHECK(seconds_since(start) < 1);
  CHECK(wait.messages.empty());
  // Not a regular file: no waiting either.
  CHECK(error_of([&] { wait_for_rank_table("/dev/null", wait.options); }).kind() == Kind::io);
  // A status given twice is not read as either one.
  TempDir dir;
  write_file(dir / "hccl.json", R"({"status": "completed", "status": "initializing"})");
  const auto repeated = error_of([&] { wait_for_rank_table(dir / "hccl.json", wait.options); });
  CHECK(repeated.kind() == Kind::duplicate);
  CHECK(repeated.pointer() == some("/status"));
  CHECK(seconds_since(start) < 1);
  CHECK(wait.messages.empty());
}

TEST_CASE("waiting: the timeout names the file, the time and the last state", "[rank_table]") {
  TempDir dir;
  const std::string path = dir / "hccl.json";
  QuickWait wait(700ms);
  const auto start = std::chrono::steady_clock::now();
  auto e = error_of([&] { wait_for_rank_table(path, wait.options); });
  CHECK(seconds_since(start) >= 0.7);
  CHECK(seconds_since(start) < 3);
  CHECK(e.kind() == Kind::io);
  CHECK(e.source() == path);
  // The last state seen, with what its folder holds instead.
  const std::string state = "it does not exist (" + dir.path() + " is empty)";
  CHECK(e.detail() == "timed out after 0.7 s waiting for the rank table: " + state);
  CHECK(std::string(e.what()) == path + ": timed out after 0.7 s waiting for the rank table: " + state);
  // Progress from the second look on, then about every 200 ms.
  CHECK(wait.messages.size() >= 2);  // 4 unless the machine stalls
  CHECK(wait.messages.size() <= 5);
  CHECK_THAT(wait.messages.front(), Contains(": " + state + "; waited 0 s of 0.7 s; "));

  write_file(path, "");
  e = error_of([&] { wait_for_rank_table(path, QuickWait(100ms).options); });
  CHECK(e.kind() == Kind::empty);
  CHECK_THAT(e.detail(), Contains("after 0.1 s") && Contains(": it is still empty"));

  write_file(path, "{");
  e = error_of([&] { wait_for_rank_table(path, QuickWait(100ms).options); });
  CHECK(e.kind() == Kind::syntax);

  std::filesystem::remove(path);
  e = error_of([&] { wait_for_rank_table(dir.path(), QuickWait(100ms).options); });
  CHECK(e.kind() == Kind::io);
  CHECK(e.source() == dir.path());
  CHECK_THAT(e.detail(), StartsWith("timed out after 0.1 s waiting for the rank table: neither "
                                    "jobstart_hccl.json nor hccl.json"));
}

TEST_CASE("the normalized copy is written once, privately, and reads back alike", "[rank_table]") {
  TempDir dir;
  for (const char* name :
       {"valid/v1_integers_not_strings.json", "valid/v0_two_pods_out_of_order.json",
        "valid/v1_2_superpod_two_pods.json", "valid/v1_unknown_fields_ignored.json", "valid/v1_utf8_bom.json"}) {
    CAPTURE(name);
    const RankTable table = davincirun::load_rank_table(corpus_dir + name);
    const std::string path = dir / (std::filesystem::path(name).stem().string() + ".json");
    write_normalized_rank_table(table, path);
    struct stat info{};
    REQUIRE(::stat(path.c_str(), &info) == 0);
    CHECK((info.st_mode & 07777) == 0600);
    const RankTable copy = davincirun::load_rank_table(path);
    CHECK(copy.normalized_json == table.normalized_json);
    CHECK(copy.world_size == table.world_size);
    REQUIRE(copy.servers.size() == table.servers.size());
    for (std::size_t i = 0; i < copy.servers.size(); ++i) {
      CHECK(copy.servers[i].server_id == table.servers[i].server_id);
      CHECK(copy.servers[i].rank_start == table.servers[i].rank_start);
      REQUIRE(copy.servers[i].devices.size() == table.servers[i].devices.size());
      for (std::size_t j = 0; j < copy.servers[i].devices.size(); ++j) {
        CHECK(copy.servers[i].devices[j].device_id == table.servers[i].devices[j].device_id);
        CHECK(copy.servers[i].devices[j].rank_id == table.servers[i].devices[j].rank_id);
        CHECK(copy.servers[i].devices[j].device_ip == table.servers[i].devices[j].device_ip);
      }
    }
    // Every scalar HCCL reads is a string.
    const Json written = Json::parse(read_text(path));
    CHECK(written["server_count"].is_string());
    CHECK(written["status"] == "completed");
    for (const auto& server : written["server_list"]) {
      for (const auto& device : server["device"]) {
        CHECK(device["device_id"].is_string());
        CHECK(device["rank_id"].is_string());
      }
    }
  }
  const RankTable table = davincirun::load_rank_table(corpus_dir + "valid/v1_unknown_fields_ignored.json");
  CHECK(Json::parse(table.normalized_json)["vendor_note"] == Json::parse(R"({"anything": [1, 2]})"));
}

TEST_CASE("writing the normalized copy never replaces a file", "[rank_table]") {
  TempDir dir;
  const RankTable table = davincirun::load_rank_table(corpus_dir + "valid/v1_single_server_8p.json");
  const std::string path = dir / "table.json";
  write_file(path, "mine");
  try {
    write_normalized_rank_table(table, path);
    FAIL("expected a SystemError");
  } catch (const SystemError& e) {
    CHECK(e.os_errno() == EEXIST);
    CHECK_THAT(std::string(e.what()), Contains(path));
  }
  CHECK(read_text(path) == "mine");  // left alone

  // A symlink planted at the path is not followed.
  std::filesystem::create_symlink(dir / "elsewhere.json", dir / "link.json");
  CHECK_THROWS_AS(write_normalized_rank_table(table, dir / "link.json"), SystemError);
  CHECK_FALSE(std::filesystem::exists(dir / "elsewhere.json"));

  CHECK_THROWS_AS(write_normalized_rank_table(table, dir / "no/such/dir.json"), SystemError);
  CHECK_THROWS_AS(write_normalized_rank_table(RankTable{}, dir / "empty.json"), std::invalid_argument);
  CHECK_FALSE(std::filesystem::exists(dir / "empty.json"));
}

TEST_CASE("keep_waiting is asked before every retry and can end the wait", "[rank_table]") {
  TempDir dir;
  struct Interrupted {};
  RankTableLoadOptions options;
  options.wait_timeout = std::chrono::seconds(60);
  options.retry_interval = std::chrono::milliseconds(10);
  int calls = 0;
  options.keep_waiting = [&calls] {
    if (++calls == 3) throw Interrupted{};
  };
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(wait_for_rank_table(dir / "not_yet.json", options), Interrupted);
  CHECK(calls == 3);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));  // not the 60 s timeout
}
