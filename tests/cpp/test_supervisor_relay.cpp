// With no console lines wanted, the supervisor's loop moves several ranks'
// output at once, on itself and a helper thread (splice(2) into each log).
// Every byte must still reach its rank's log, and the console must hear of
// each move only from the loop's thread, rank by rank in order.
#include <dirent.h>
#include <sched.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "davincirun/supervisor.hpp"
#include "helpers/pattern.hpp"
#include "test_supervisor_support.hpp"

using namespace davincirun;
using namespace davincirun_test;

namespace {

// The threads of this process now (/proc/self/task).
std::size_t threads_now() {
  std::size_t n = 0;
  if (DIR* dir = ::opendir("/proc/self/task")) {
    while (const dirent* entry = ::readdir(dir)) n += entry->d_name[0] != '.' ? 1 : 0;
    ::closedir(dir);
  }
  return n;
}

bool may_use_two_cpus() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  return ::sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) >= 2;
}

// A watch of the output, as the progress watch is: no lines, the raw bytes.
struct ThreadNotingWatch final : LineSink {
  void write(std::size_t, std::string_view) override { note(); }
  void notice(std::string_view) override { note(); }
  bool wants_lines() const noexcept override { return false; }
  void output(std::size_t index, std::string_view bytes) override {
    note();
    most_threads = std::max(most_threads, threads_now());
    seen[index].push_back({0, std::string(bytes)});
  }
  void output_skipped(std::size_t index, std::size_t bytes) override {
    note();
    seen[index].push_back({bytes, {}});
  }
  bool wants_output() const noexcept override { return true; }
  void rank_exited(std::size_t, ExitStatus, bool) override { note(); }

  void note() {
    const std::lock_guard<std::mutex> lock(mutex);  // a call from two threads at once must not corrupt the set
    threads.insert(std::this_thread::get_id());
  }
  std::mutex mutex;
  std::set<std::thread::id> threads;
  std::size_t most_threads = 0;  // in this process, seen while the output came
  std::map<std::size_t, std::vector<std::pair<std::size_t, std::string>>> seen;  // (skipped, or 0 and bytes)
};

}  // namespace

TEST_CASE("eight ranks flooding spliced output: every byte in its log, the watch told in order on one thread",
          "[supervisor][relay]") {
  TempDir dir;
  ThreadNotingWatch watch;
  constexpr std::size_t ranks = 8;
  constexpr std::size_t bytes = std::size_t{6} << 20;
  std::vector<RankLaunch> launches;
  for (std::size_t r = 0; r < ranks; ++r) {
    launches.push_back(launch(dir, static_cast<int>(r), {helper("child_write"), std::to_string(bytes)}));
  }
  const std::size_t threads_before = threads_now();
  Supervisor sup(launches, SupervisorOptions{}, watch);
  const auto [result, elapsed] = run_with_deadline(sup);

  REQUIRE(result.ranks.size() == ranks);
  const std::string expected = pattern_bytes(bytes);
  for (std::size_t r = 0; r < ranks; ++r) {
    INFO("rank " << r);
    CHECK(result.ranks[r].status.success());
    CHECK(result.ranks[r].output_bytes == bytes);
    CHECK(read_file(result.ranks[r].log_path) == expected);
    // What the watch heard of this rank covers its output exactly, in order,
    // each look at the bytes being what the rank wrote there.
    std::size_t at = 0;
    for (const auto& [skipped, given] : watch.seen[r]) {
      if (skipped > 0) {
        at += skipped;
        continue;
      }
      REQUIRE(given.size() <= RankLog::spliced_output_window);
      REQUIRE(given == expected.substr(at, given.size()));
      at += given.size();
    }
    CHECK(at == bytes);
  }
  CHECK(watch.threads == std::set<std::thread::id>{std::this_thread::get_id()});
  // The run added the deadline's watchdog and, with two CPUs to use, the
  // relay's helper: several pipes were full at once in some round.
  CHECK(watch.most_threads == threads_before + (may_use_two_cpus() ? 2 : 1));
  check_nothing_left(result);
}
