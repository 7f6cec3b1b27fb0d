// A rank table path that finds nothing: a missing folder fails at once; a
// missing file is waited for with lines naming the name alike in its folder,
// how long the wait has lasted and how to end it or not wait.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/edit_distance.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/rank_table_loader.hpp"
#include "rank_table/rank_table_absence.hpp"
#include "test_rank_table_support.hpp"
#include "test_support.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using davincirun::RankTableError;
using davincirun::RankTableLoadOptions;
using davincirun::wait_for_rank_table;
using davincirun_test::Joined;
using davincirun_test::TempDir;
using davincirun_test::write_file;
using Kind = RankTableError::Kind;
using namespace davincirun::detail;
using namespace rank_table_test;
using namespace std::chrono_literals;

namespace {

const std::string good_table = read_text(corpus_dir + "valid/v1_two_servers_16p.json");

using Clock = std::chrono::steady_clock;

// The lines of one wait and when each came, counted from the start.
struct Lines {
  std::vector<std::string> text;
  std::vector<double> at;
  Clock::time_point start = Clock::now();
  RankTableLoadOptions options;
  explicit Lines(std::chrono::milliseconds timeout, std::chrono::milliseconds retry = 20ms,
                 std::chrono::milliseconds interval = 200ms) {
    options.wait_timeout = timeout;
    options.retry_interval = retry;
    options.progress_interval = interval;
    options.progress = [this](const std::string& line) {
      text.push_back(line);
      at.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    };
  }
  RankTableError error_waiting_for(const std::string& path) {
    start = Clock::now();
    return error_of([&] { wait_for_rank_table(path, options); });
  }
};

RankTableLoadOptions no_wait() {
  RankTableLoadOptions options;
  options.wait_timeout = 0ms;
  return options;
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

TEST_CASE("the folder of a path, as written", "[rank_table]") {
  CHECK(folder_of("/a/b") == "/a");
  CHECK(folder_of("/a/b/") == "/a");
  CHECK(folder_of("/a//b") == "/a");
  CHECK(folder_of("a/b.json") == "a");
  CHECK(folder_of("b.json") == ".");
  CHECK(folder_of("/b") == "/");
  CHECK(folder_of("/") == "/");
  CHECK(folder_of(".") == ".");
}

TEST_CASE("a path whose folder does not exist fails at once, naming the nearest folder that does", "[rank_table]") {
  TempDir dir;
  std::filesystem::create_directory(dir / "tables");
  const std::string path = dir / "tabels/8p/hccl.json";
  Lines lines(60s);
  const auto e = lines.error_waiting_for(path);
  CHECK(seconds_since(lines.start) < 1);
  CHECK(lines.text.empty());
  CHECK(e.kind() == Kind::io);
  CHECK(e.source() == path);
  CHECK(e.detail() == "cannot open the rank table: the folder " + dir / "tabels/8p" +
                          " does not exist (the nearest that exists is " + dir.path() + "; did you mean " +
                          dir / "tables" +
                          "?); not waited for, as a platform writes its table into a folder that exists");

  // With waiting off, the same folder; nothing alike: no suggestion.
  const auto unlike = error_of([&] { wait_for_rank_table(dir / "zzzzzzzz/hccl.json", no_wait()); });
  CHECK(unlike.detail() == "cannot open the rank table: the folder " + dir / "zzzzzzzz" +
                               " does not exist (the nearest that exists is " + dir.path() + ")");

  // A file where a folder should be.
  write_file(dir / "plain", "x");
  const auto file = lines.error_waiting_for(dir / "plain/hccl.json");
  CHECK(seconds_since(lines.start) < 1);
  CHECK(file.kind() == Kind::io);
  CHECK_THAT(file.detail(), StartsWith("cannot open the rank table: " + dir / "plain" + " is not a folder"));
  const auto below = lines.error_waiting_for(dir / "plain/sub/hccl.json");
  CHECK_THAT(below.detail(), StartsWith("cannot open the rank table: the folder " + dir / "plain/sub" +
                                        " does not exist: " + dir / "plain" + " is not a folder"));
  CHECK(lines.text.empty());
}

TEST_CASE("a folder behind a symbolic link whose target is missing is waited for", "[rank_table]") {
  TempDir dir;
  std::filesystem::create_directory_symlink(dir / "later", dir / "link");
  Lines lines(20s);
  {
    const Joined writer([&] {
      std::this_thread::sleep_for(200ms);
      std::filesystem::create_directory(dir / "later");
      write_file(dir / "later/hccl.json", good_table);
    });
    const auto loaded = wait_for_rank_table(dir / "link/hccl.json", lines.options);
    CHECK(loaded.table.world_size == 16);
  }
  REQUIRE_FALSE(lines.text.empty());
  CHECK_THAT(lines.text[0], StartsWith("waiting for rank table " + dir / "link/hccl.json" + ": it does not exist"));
}

TEST_CASE("the name alike: a few edits from the one typed, the nearest first", "[rank_table]") {
  CHECK(close_enough(3) == 1);
  CHECK(close_enough(6) == 1);
  CHECK(close_enough(8) == 2);
  CHECK(close_enough(12) == 3);
  CHECK(close_enough(40) == 3);
  const std::vector<std::string> names = {"train.py", "hccl_2p.json", "hccl.json", "hccl.jsno"};
  const auto near = nearest_name("hcl.json", names);
  REQUIRE(near);
  CHECK(near->name == "hccl.json");
  CHECK(near->distance == 1);
  CHECK(nearest_name("hccl.jsn", names)->name == "hccl.jsno");  // ties (1 edit each): the first by name
  CHECK(nearest_name("model.ckpt", names)->distance > close_enough(10));
  CHECK_FALSE(nearest_name("hccl.json", {}));
}

TEST_CASE("a missing file is named with the nearest name in its folder", "[rank_table]") {
  TempDir dir;
  CHECK(absent_file_note(dir / "hccl.json") == " (" + dir.path() + " is empty)");
  write_file(dir / "hccl.json", good_table);
  write_file(dir / "train.py", "");
  CHECK(absent_file_note(dir / "hcl.json") == " (did you mean 'hccl.json'?)");
  CHECK(absent_file_note(dir / "HCCL.JSON") == " (the nearest name in " + dir.path() + " is 'hccl.json')");
  CHECK(absent_file_note(dir / "trian.py") == " (did you mean 'train.py'?)");
  CHECK(absent_file_note(dir / "nowhere/x.json").empty());  // a folder that cannot be read

  const std::string path = dir / "hcl.json";
  Lines lines(300ms);
  const auto e = lines.error_waiting_for(path);
  REQUIRE_FALSE(lines.text.empty());
  CHECK(lines.text[0] == "waiting for rank table " + path +
                             ": it does not exist (did you mean 'hccl.json'?); waited 0 s of 0.3 s; Ctrl-C stops, "
                             "wait_timeout 0 does not wait");
  CHECK(e.kind() == Kind::io);
  CHECK(e.detail() ==
        "timed out after 0.3 s waiting for the rank table: it does not exist (did you mean 'hccl.json'?)");

  const auto at_once = error_of([&] { wait_for_rank_table(path, no_wait()); });
  CHECK(at_once.detail() == "cannot open the rank table: No such file or directory (did you mean 'hccl.json'?)");
}

TEST_CASE("a directory without a table is named with what it holds", "[rank_table]") {
  TempDir dir;
  CHECK(directory_note(dir.path(), {"hccl.json"}) == " (it is empty)");
  write_file(dir / "y", "");
  write_file(dir / "x.json", "");
  CHECK(directory_note(dir.path(), {"jobstart_hccl.json", "hccl.json"}) == " (it holds 'x.json' and 'y')");
  for (const char* name : {"hccl_8p.json", "a", "b"}) write_file(dir / name, "");
  CHECK_THAT(directory_note(dir.path(), {"jobstart_hccl.json", "hccl.json"}),
             StartsWith(" (it holds 'hccl_8p.json', 'x.json', ") && EndsWith(" and 2 more)"));

  Lines lines(200ms);
  const auto e = lines.error_waiting_for(dir.path());
  REQUIRE_FALSE(lines.text.empty());
  CHECK_THAT(lines.text[0], Contains(": neither jobstart_hccl.json nor hccl.json exists in the directory (it holds "
                                     "'hccl_8p.json', 'x.json', "));
  CHECK_THAT(e.detail(), Contains("hccl.json exists in the directory (it holds 'hccl_8p.json'"));
  const auto at_once = error_of([&] { wait_for_rank_table(dir.path(), no_wait()); });
  CHECK_THAT(at_once.detail(), StartsWith("no rank table in this directory: neither jobstart_hccl.json nor "
                                          "hccl.json exists in the directory (it holds 'hccl_8p.json'"));
}

TEST_CASE("waiting lines: the first with the second look, then every progress_interval", "[rank_table]") {
  TempDir dir;
  const std::string path = dir / "hccl.json";

  SECTION("the front end's words for not waiting and for stopping") {
    Lines lines(1300ms, 100ms, 500ms);
    lines.options.no_wait_setting = "--wait-timeout 0";
    lines.options.stop_name = "interrupt (the stop button)";
    lines.error_waiting_for(path);
    REQUIRE(lines.text.size() >= 2);  // about 0.1, 0.6 and 1.1 s
    CHECK(lines.text.size() <= 3);
    CHECK(lines.at[0] >= 0.09);  // not at the first look
    CHECK(lines.at[0] < 1.0);
    CHECK(lines.at[1] - lines.at[0] >= 0.49);
    CHECK_THAT(lines.text[0], EndsWith("; waited 0 s of 1.3 s; interrupt (the stop button) stops, "
                                       "--wait-timeout 0 does not wait"));
  }
  SECTION("a table found whole by the second look needs no line") {
    write_file(path, "");
    Lines lines(20s, 300ms);
    {
      const Joined writer([&] {
        std::this_thread::sleep_for(50ms);
        write_file(path, good_table);
      });
      CHECK(wait_for_rank_table(path, lines.options).table.world_size == 16);
    }
    CHECK(lines.text.empty());
  }
  SECTION("by default: one line within the first seconds, the next 30 s later") {
    const RankTableLoadOptions defaults;
    CHECK(defaults.progress_interval == 30s);
    CHECK(defaults.retry_interval == 1s);
    CHECK(defaults.no_wait_setting == "wait_timeout 0");
    CHECK(defaults.stop_name == "Ctrl-C");
    Lines lines(2500ms, defaults.retry_interval, defaults.progress_interval);
    lines.error_waiting_for(path);
    REQUIRE(lines.text.size() == 1);
    CHECK(lines.at[0] >= 0.9);
    CHECK(lines.at[0] < 5);
    CHECK_THAT(lines.text[0], Contains("; waited 1 s of 2.5 s; "));
  }
}
