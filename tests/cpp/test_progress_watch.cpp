// The progress a rank's lines report, the rule that names slow ranks, and
// the terminal's status line that shows them.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "davincirun/console_sink.hpp"
#include "davincirun/rank_progress.hpp"
#include "output/job_progress.hpp"
#include "output/rank_activity.hpp"
#include "output/slow_ranks.hpp"

using namespace davincirun;
using namespace davincirun::detail;

namespace {

ProgressReading read(std::string_view line) {
  const auto r = parse_progress(line);
  REQUIRE(r);
  return *r;
}

}  // namespace

TEST_CASE("progress lines of tqdm, Keras, MindSpore and plain words are read", "[progress]") {
  auto r = read("Epoch 2:  45%|####      | 45/100 [00:03<00:04, 12.1it/s]");
  CHECK(r.epoch == 2);
  CHECK(r.step == 45);
  CHECK(r.steps == 100);
  r = read("45it [00:03, 12.1it/s]");
  CHECK(r.step == 45);
  CHECK(r.steps == -1);
  r = read("Epoch 3/10");
  CHECK(r.epoch == 3);
  CHECK(r.epochs == 10);
  CHECK(r.step == -1);
  r = read("45/100 [=====>....] - ETA: 3s - loss: 0.6");
  CHECK(r.step == 45);
  r = read("epoch: 1 step: 45, loss is 2.30");
  CHECK(r.epoch == 1);
  CHECK(r.step == 45);
  CHECK(read("Step: 7/9").steps == 9);
  CHECK(read("iteration=12").step == 12);
  CHECK(read("global_step 300").step == 300);
}

TEST_CASE("numbers that are not progress are left alone", "[progress]") {
  CHECK_FALSE(parse_progress("epoch time: 120 ms, per step time: 3 ms"));
  CHECK_FALSE(parse_progress("steps per second: 12"));
  CHECK_FALSE(parse_progress("loss 0.5 at 2026-12-05 16:17:19"));
  CHECK_FALSE(parse_progress("step 1.5"));
  CHECK_FALSE(parse_progress("batch_size=32"));
  CHECK_FALSE(parse_progress("step 99999999999999"));
  CHECK_FALSE(parse_progress(""));
}

TEST_CASE("a new epoch starts its steps again and its length is learned", "[progress]") {
  ProgressHistory p;
  const auto now = WallClock::now();
  CHECK(p.add(read("epoch: 1 step: 50"), now));
  CHECK_FALSE(p.add(read("epoch: 1 step: 50"), now));
  CHECK(p.add(read("epoch: 2 step: 1"), now));
  CHECK(p.longest_epoch() == 50);
  CHECK(p.position(50) == Approx(101));
  CHECK(p.text() == "epoch 2 step 1");
}

TEST_CASE("activity intervals double instead of growing past their bound", "[progress]") {
  const auto start = WallClock::now();
  ActivityHistory a(start);
  a.add(10, start + std::chrono::milliseconds(50));
  a.add(10, start + std::chrono::seconds(100));
  CHECK(a.buckets().size() <= ActivityHistory::max_buckets);
  CHECK(a.step_s() > ActivityHistory::first_step_s);
  std::uint64_t total = 0;
  for (auto b : a.buckets()) total += b;
  CHECK(total == 20);
}

TEST_CASE("a rank behind the median for the window is slow, and not once it caught up", "[progress]") {
  using std::chrono::seconds;
  SlowRanks rule(std::chrono::milliseconds(2000));
  const auto t0 = SlowRanks::Clock::now();
  std::vector<SlowRanks::Standing> s(4);
  for (auto& x : s) x.position = 40;
  s[2].position = 10;
  CHECK(rule.evaluate(s, t0).empty());  // behind, not yet for the window
  CHECK(rule.evaluate(s, t0 + seconds(1)).empty());
  auto changes = rule.evaluate(s, t0 + seconds(3));
  REQUIRE(changes.size() == 1);
  CHECK(changes[0].index == 2);
  CHECK(changes[0].slow);
  CHECK(rule.slow(2));
  s[2].position = 39;  // within 2 steps of the median
  changes = rule.evaluate(s, t0 + seconds(4));
  REQUIRE(changes.size() == 1);
  CHECK_FALSE(changes[0].slow);
  // 10 % of the median: 95 against 100 is not behind
  for (auto& x : s) x.position = 100;
  s[1].position = 95;
  CHECK(rule.evaluate(s, t0 + seconds(10)).empty());
  CHECK(rule.evaluate(s, t0 + seconds(20)).empty());
}

TEST_CASE("with the job's pace from other servers, ranks are compared with it, not with each other", "[progress]") {
  using std::chrono::seconds;
  SlowRanks rule(std::chrono::milliseconds(2000));
  const auto t0 = SlowRanks::Clock::now();
  std::vector<SlowRanks::Standing> s(2);  // this server's two ranks, together, and far behind the job
  s[0].position = 10;
  s[1].position = 11;
  CHECK(rule.evaluate(s, t0, 100.0).empty());
  const auto changes = rule.evaluate(s, t0 + seconds(3), 100.0);
  REQUIRE(changes.size() == 2);
  CHECK((changes[0].slow && changes[1].slow));
  REQUIRE(changes[0].job_pace);
  CHECK(*changes[0].job_pace == 100.0);
  // Without it they are level with each other: neither is behind.
  CHECK(rule.evaluate(s, t0 + seconds(4)).size() == 2);
  CHECK_FALSE(rule.slow(0));
  // The median of what is known: an upper one; one alone counts for a server's pace.
  CHECK(SlowRanks::median(s, 1)->first == 11);
  s[1].position.reset();
  CHECK_FALSE(SlowRanks::median(s));
  CHECK(SlowRanks::median(s, 1)->first == 10);
}

TEST_CASE("a window of zero never names a rank slow, nor one alone", "[progress]") {
  SlowRanks never(std::chrono::milliseconds(0));
  std::vector<SlowRanks::Standing> s(2);
  s[0].position = 100;
  s[1].position = 1;
  const auto t0 = SlowRanks::Clock::now();
  CHECK(never.evaluate(s, t0 + std::chrono::hours(1)).empty());
  SlowRanks rule(std::chrono::milliseconds(1));
  std::vector<SlowRanks::Standing> alone(2);
  alone[0].position = 5;
  CHECK(rule.evaluate(alone, t0).empty());
  CHECK(rule.evaluate(alone, t0 + std::chrono::seconds(5)).empty());
}

TEST_CASE("the status line says slow ranks first, then bars or progress, then the output rate", "[console_sink]") {
  const std::vector<std::string> labels = {"rank 0", "rank 1", "rank 2"};
  std::vector<RankStatus> statuses(3);
  for (std::size_t i = 0; i < 3; ++i) {
    statuses[i].index = i;
    statuses[i].bytes_per_s = 512;
  }
  statuses[1].progress = "epoch 1 step 12";
  statuses[2].progress = "epoch 1 step 4";
  CHECK(status_summary(statuses, labels, "") == "[rank 1] epoch 1 step 12 | output 1.5 KB/s");
  statuses[2].slow = true;
  CHECK(status_summary(statuses, labels, "[rank 0] 45%|####") == "slow: rank 2 | [rank 0] 45%|#### | output 1.5 KB/s");
  for (auto& s : statuses) s.bytes_per_s = 0;
  statuses[0].slow = true;
  CHECK(status_summary(statuses, labels, "") == "slow: rank 0, rank 2 | [rank 1] epoch 1 step 12");
  CHECK(status_summary({}, labels, "") == "");
}

TEST_CASE("a terminal's status line shows the ranks' status and drops a rank's when it exits", "[console_sink]") {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0);
  {
    FdLineSink sink(fds[1], -1, ConsoleStyle{false, false, true}, {"rank 0", "rank 1"});
    RankStatus s;
    s.index = 1;
    s.progress = "epoch 2 step 7";
    s.bytes_per_s = 2048;
    sink.ranks_status({s});
    sink.rank_exited(1, ExitStatus{}, false);
  }
  std::string got(4096, '\0');
  const ssize_t n = ::read(fds[0], got.data(), got.size());
  ::close(fds[0]);
  ::close(fds[1]);
  got.resize(static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
  CHECK(got ==
        "\r[rank 1] epoch 2 step 7 | output 2.0 KB/s\x1b[K"  // drawn
        "\r\x1b[K");                                         // gone with its rank
}

namespace {

// Keeps the last status of each rank it is told.
struct StatusSink final : LineSink {
  std::vector<std::string> lines;
  std::map<std::size_t, RankStatus> last;
  void write(std::size_t, std::string_view text) override { lines.emplace_back(text); }
  void notice(std::string_view) override {}
  void ranks_status(const std::vector<RankStatus>& statuses) override {
    for (const auto& s : statuses) last[s.index] = s;
  }
};

}  // namespace

TEST_CASE("a read's progress is its last progress line, after the last epoch line before it", "[progress]") {
  StatusSink console;
  JobProgress::Options options;
  options.labels = {"rank 0", "rank 1"};
  JobProgress progress(console, options);
  // A flood of lines a read: the epoch line, steps, then lines that are not progress.
  std::string read = "Epoch 3\n";
  for (int step = 1; step <= 500; ++step) read += "step " + std::to_string(step) + " loss 0.5\n";
  read += "saving a checkpoint\ndone saving\n";
  progress.output(0, read);
  progress.write(0, "[rank 0] done saving\n");
  progress.output(1, "epoch: 2 step: 7, loss is 0.3\nEpoch 4\n");
  progress.write(1, "[rank 1] Epoch 4\n");
  progress.tick();
  CHECK(console.last.at(0).progress == "epoch 3 step 500");
  CHECK(console.last.at(1).progress == "epoch 4");
  CHECK(console.last.at(0).bytes_per_s > 0);
  CHECK(console.lines.size() == 2);  // every line reaches the console
}

TEST_CASE("a line split across reads, and a bar redrawn after a carriage return, are read as a terminal shows them",
          "[progress]") {
  StatusSink console;
  JobProgress::Options options;
  options.labels = {"rank 0", "rank 1", "rank 2"};
  JobProgress progress(console, options);
  progress.output(0, "noise\nep");
  progress.output(0, "och 2 st");
  progress.output(0, "ep 41 loss 0.1\nsaving\n");
  // tqdm's bar: each state drawn over the last, the line never finished.
  progress.output(1, "\r 10%|#         | 1/10 [00:00<00:05, 1.9it/s]");
  progress.output(1, "\r 70%|#######   | 7/10 [00:03<00:01, 2.1it/s]\r");
  progress.output(2, "Step: 5/9\r");
  progress.output(2, "Step: 6/9");
  progress.tick();
  CHECK(console.last.at(0).progress == "epoch 2 step 41");
  CHECK(console.last.at(1).progress == "step 7/10");
  CHECK(console.last.at(2).progress == "step 6/9");
  CHECK(console.lines.empty());  // output() is read, not shown: the lines come through write()
}

TEST_CASE("after skipped bytes the first, cut line is not read, and a redraw or a new line starts clean",
          "[progress]") {
  StatusSink console;
  JobProgress::Options options;
  options.labels = {"rank 0", "rank 1", "rank 2"};
  JobProgress progress(console, options);
  progress.output(0, "Step: 2/9\n");
  progress.output_skipped(0, 100000);
  progress.output(0, "0/9 with its start skipped\n");  // the end of a cut line: not "step 0/9"
  progress.output_skipped(1, 100000);
  progress.output(1, "|##   | 5/9 [00:01<00:01, 3.1it/s]\r 60%|###  | 6/9 [00:02<00:01, 3.1it/s]");
  progress.output_skipped(2, 100000);
  progress.output(2, "p: 1/9\nStep: 3/9\nStep: 4/9\n");
  progress.tick();
  CHECK(console.last.at(0).progress == "step 2/9");
  CHECK(console.last.at(1).progress == "step 6/9");
  CHECK(console.last.at(2).progress == "step 4/9");
  CHECK(progress.activity(0).rate(WallClock::now()) > 0);
}

TEST_CASE("the watch asks for prefixed lines and bars only when its console shows them", "[progress]") {
  NullLineSink nowhere;
  JobProgress::Options options;
  options.labels = {"rank 0"};
  JobProgress quiet(nowhere, options);
  CHECK(quiet.wants_output());
  CHECK_FALSE(quiet.wants_lines());  // a job's stdout on /dev/null: no lines are made at all
  CHECK_FALSE(quiet.wants_progress());
  quiet.output(0, "step 3/9\n");
  quiet.tick();
  CHECK(quiet.progress_of(0).text() == "step 3/9");

  StatusSink shown;
  JobProgress loud(shown, options);
  CHECK(loud.wants_lines());
}
