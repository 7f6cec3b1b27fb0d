// Lines redrawn with '\r' (progress bars): the console gets the final state
// of each line once, LineSink::progress() its current state, the log file
// every byte.
#include <catch2/catch.hpp>

#include <algorithm>

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "davincirun/console_sink.hpp"
#include "davincirun/display_width.hpp"
#include "davincirun/log_streamer.hpp"
#include "davincirun/non_blocking_sink.hpp"
#include "test_support.hpp"

using namespace davincirun;
using namespace davincirun_test;

namespace {

using Progress = std::vector<std::pair<std::size_t, std::string>>;

// One rank's stream: every write() below is one read of the RankLog.
class Stream {
 public:
  Stream() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2");
    write_fd_ = fds[1];
    log_.emplace(0, "rank 0", UniqueFd(fds[0]), dir_ / "rank_0.log", console);
  }
  ~Stream() {
    if (write_fd_ >= 0) ::close(write_fd_);
  }
  void write(const std::string& data) {
    REQUIRE(::write(write_fd_, data.data(), data.size()) == static_cast<ssize_t>(data.size()));
    written_ += data;
    REQUIRE(log_->read_available(scratch_, data.size() + 1) == RankLog::ReadResult::would_block);
  }
  void end() {
    ::close(write_fd_);
    write_fd_ = -1;
    REQUIRE(log_->read_available(scratch_, 1 << 20) == RankLog::ReadResult::eof);
    log_->finish();
    CHECK(read_file(dir_ / "rank_0.log") == written_);  // the file keeps every byte
  }
  RecordingSink console;

 private:
  TempDir dir_;
  StreamScratch scratch_{4096};
  std::optional<RankLog> log_;
  int write_fd_ = -1;
  std::string written_;
};

Progress progress_of(std::initializer_list<const char*> texts) {
  Progress out;
  for (const char* t : texts) out.emplace_back(0, t);
  return out;
}

}  // namespace

TEST_CASE("a tqdm-style bar (a CR before each state) is one line on the console", "[progress]") {
  Stream s;
  s.write("epoch 1\n");
  for (int i = 1; i <= 100; ++i) s.write("\r" + std::to_string(i) + "%|bar|");
  s.write("\n");
  s.write("done\n");
  s.end();
  CHECK(s.console.text() == "[rank 0] epoch 1\n[rank 0] 100%|bar|\n[rank 0] done\n");
  Progress expected;
  for (int i = 1; i <= 100; ++i) expected.emplace_back(0, std::to_string(i) + "%|bar|");
  expected.emplace_back(0, "");  // the line is finished
  CHECK(s.console.progress_calls() == expected);
}

TEST_CASE("a counter printed with end=CR shows its latest value, bare CRs erase nothing", "[progress]") {
  Stream s;
  s.write("1\r");
  s.write("2\r");
  s.write("\r");  // nothing new to show
  s.write("3\r");
  s.write("finished\n");
  s.end();
  CHECK(s.console.text() == "[rank 0] finished\n");
  CHECK(s.console.progress_calls() == progress_of({"1", "2", "3", ""}));
}

TEST_CASE("several redraws in one read give one progress call with the last state", "[progress]") {
  Stream s;
  s.write("a\rb\rc\rd");
  s.end();  // the stream ends inside the redrawn line: its state is the last line
  CHECK(s.console.text() == "[rank 0] d\n");
  CHECK(s.console.progress_calls() == progress_of({"d", ""}));
  // The line comes first, then the progress is cleared.
  CHECK(s.console.events().back() == "progress 0: ");
}

TEST_CASE("CR LF is a line end, also split across two reads", "[progress]") {
  Stream s;
  s.write("windows line\r\n");
  s.write("split\r");
  s.write("\nnext\r\n");
  s.end();
  CHECK(s.console.text() == "[rank 0] windows line\n[rank 0] split\n[rank 0] next\n");
  // The split one looked like a redraw for a moment; it was cleared with its line.
  CHECK(s.console.progress_calls() == progress_of({"split", ""}));
}

TEST_CASE("text before a CR inside a line is what a terminal overwrites", "[progress]") {
  Stream s;
  s.write("old text\rnew\n");
  s.write("keep\rthis\r\r\n");
  s.end();
  CHECK(s.console.text() == "[rank 0] new\n[rank 0] this\n");
  CHECK(s.console.progress_calls().empty());  // each line ended within its read
}

TEST_CASE("progress text is cut at max_progress_bytes on a UTF-8 boundary", "[progress]") {
  Stream s;
  // 1023 ASCII bytes then a 3-byte character straddling the limit.
  const std::string text = std::string(RankLog::max_progress_bytes - 1, 'x') + "\xe2\x96\x88" + "tail";
  s.write("\r" + text);
  s.write("\n");
  s.end();
  const Progress calls = s.console.progress_calls();
  REQUIRE(calls.size() == 2);
  CHECK(calls[0].second == std::string(RankLog::max_progress_bytes - 1, 'x'));
  CHECK(calls[1].second.empty());
  CHECK(s.console.text() == "[rank 0] " + text + "\n");  // the line itself is whole
}

TEST_CASE("text waiting for its newline is progress until the line ends, whole lines are not", "[progress]") {
  Stream s;
  s.write("loading");
  s.write("...");
  s.write(" done\nwhole line\n");
  s.write("a\nb\n");
  s.end();
  CHECK(s.console.text() == "[rank 0] loading... done\n[rank 0] whole line\n[rank 0] a\n[rank 0] b\n");
  CHECK(s.console.progress_calls() == progress_of({"loading", "loading...", ""}));
}

TEST_CASE("nested bars (cursor moved up after each redraw) are progress, never lines", "[progress]") {
  Stream s;
  // tqdm's outer bar at position 0, its inner bar at position 1: the inner
  // one goes down a line, redraws, and moves the cursor back up.
  s.write("\repoch 1/2");
  s.write("\n\rbatch 1/3\x1b[A");
  s.write("\n\rbatch 2/3\x1b[A");
  s.write("\n\rbatch 3/3\x1b[A");
  s.write("\repoch 2/2");
  s.write("\n\rbatch 1/3\x1b[2A");
  s.write("\nepoch summary\n");
  s.end();
  // The outer bar's states become lines as the inner bar pushes them out;
  // the inner bar's never do.
  CHECK(s.console.text() == "[rank 0] epoch 1/2\n[rank 0] epoch 2/2\n[rank 0] epoch summary\n");
  const Progress calls = s.console.progress_calls();
  CHECK(std::find(calls.begin(), calls.end(), Progress::value_type{0, "batch 2/3\x1b[A"}) != calls.end());
  CHECK(calls.back().second.empty());
}

TEST_CASE("NonBlockingSink passes progress and exits on in order with the lines", "[progress]") {
  RecordingSink target;
  {
    NonBlockingSink sink(target);
    sink.write(0, "[rank 0] a\n");
    sink.progress(0, "50%");
    sink.write(0, "[rank 0] b\n");
    sink.rank_exited(0, ExitStatus{ExitStatus::Kind::exited, 3}, false);
    sink.rank_exited(1, ExitStatus{ExitStatus::Kind::signaled, 15}, true);
  }
  CHECK(target.events() == std::vector<std::string>{"lines [rank 0] a\n", "progress 0: 50%", "lines [rank 0] b\n",
                                                    "exit 0: exit code 3", "exit 1: signal 15 (SIGTERM) (stopped)"});
}

TEST_CASE("a console that does not want progress (a terminal) gets none, and the same lines", "[progress]") {
  class LinesOnly final : public LineSink {
   public:
    void write(std::size_t, std::string_view lines) override { text += lines; }
    void notice(std::string_view lines) override { text += lines; }
    void progress(std::size_t, std::string_view) override { ++progress_calls; }
    std::string text;
    int progress_calls = 0;
  } console;
  CHECK_FALSE(FdLineSink(-1).wants_progress());
  CHECK_FALSE(NonBlockingSink(console).wants_progress());
  TempDir dir;
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  RankLog log(0, "rank 0", UniqueFd(fds[0]), dir / "rank_0.log", console);
  StreamScratch scratch(4096);
  const std::string data = "\r10%\r20%\rdone\nloading...";
  REQUIRE(::write(fds[1], data.data(), data.size()) == static_cast<ssize_t>(data.size()));
  ::close(fds[1]);
  while (log.read_available(scratch, 1 << 20) != RankLog::ReadResult::eof) {}
  log.finish();
  CHECK(console.text == "[rank 0] done\n[rank 0] loading...\n");
  CHECK(console.progress_calls == 0);
}

TEST_CASE("colourize_prefixes colours rank prefixes by rank and notices in bold, nothing else", "[console_sink]") {
  CHECK(colourize_prefixes("[rank 0] a [rank 1] b\n[rank 7]+ c\n[davincirun] note\nplain [rank 2]\n") ==
        "\x1b[34m[rank 0]\x1b[0m a [rank 1] b\n"
        "\x1b[35m[rank 7]+\x1b[0m c\n"
        "\x1b[1m[davincirun]\x1b[0m note\n"
        "plain [rank 2]\n");
  CHECK(std::string(rank_colour(6)) == rank_colour(0));
  for (int rank = 0; rank < 6; ++rank) {
    const std::string c = rank_colour(rank);
    CHECK((c != "31" && c != "32" && c != "33"));  // red, green and yellow mean something else
  }
}

TEST_CASE("a terminal console shows progress in a status line under the finished lines", "[console_sink]") {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0);
  {
    FdLineSink sink(fds[1], -1, ConsoleStyle{false, false, true}, {"rank 0", "rank 1"});
    CHECK(sink.wants_progress());
    sink.progress(0, "10%|#");
    sink.progress(1, "\x1b[31m5%\x1b[0m|");  // the rank's own escape codes are left out
    sink.write(0, "[rank 0] epoch 1\n");
    sink.progress(0, "");
    sink.progress(1, "");
  }
  std::string got(4096, '\0');
  const ssize_t n = ::read(fds[0], got.data(), got.size());
  ::close(fds[0]);
  ::close(fds[1]);
  REQUIRE(n > 0);
  got.resize(static_cast<std::size_t>(n));
  CHECK(got ==
        "\r[rank 0] 10%|#\x1b[K"                                           // drawn
        "\r\x1b[K\r[rank 0] 10%|# | [rank 1] 5%|\x1b[K"                    // redrawn with rank 1
        "\r\x1b[K[rank 0] epoch 1\n\r[rank 0] 10%|# | [rank 1] 5%|\x1b[K"  // a line above it
        "\r\x1b[K\r[rank 1] 5%|\x1b[K"                                     // rank 0's bar finished
        "\r\x1b[K");                                                       // and rank 1's: the line is gone
}

TEST_CASE("the status line is cut to the width at a character boundary", "[console_sink]") {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0);
  {
    FdLineSink sink(fds[1], -1, ConsoleStyle{false, false, true}, {"rank 0", "rank 1"});
    std::string bar;
    for (int i = 0; i < 100; ++i) bar += "\xe2\x96\x88";  // 100 × U+2588, 3 bytes each
    sink.progress(0, bar);
  }
  std::string got(4096, '\0');
  const ssize_t n = ::read(fds[0], got.data(), got.size());
  ::close(fds[0]);
  ::close(fds[1]);
  got.resize(static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
  // A pipe has no width: 79 columns. "[rank 0] " is 9 of them.
  std::string expected = "\r[rank 0] ";
  for (int i = 0; i < 70; ++i) expected += "\xe2\x96\x88";
  CHECK(got == expected + "\x1b[K");
}

TEST_CASE("the status line is cut to display columns: a CJK character takes two", "[console_sink]") {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0);
  const std::string xun = "\xe8\xae\xad";  // 训, two columns
  {
    FdLineSink sink(fds[1], -1, ConsoleStyle{false, false, true}, {"rank 0", "rank 1"});
    std::string description;
    for (int i = 0; i < 40; ++i) description += xun;
    sink.progress(0, "x" + description);
  }
  std::string got(4096, '\0');
  const ssize_t n = ::read(fds[0], got.data(), got.size());
  ::close(fds[0]);
  ::close(fds[1]);
  got.resize(static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
  // A pipe has no width: 79 columns. "[rank 0] x" takes 10, then 34
  // characters of two columns make 78; a 35th would make 80.
  std::string expected = "\r[rank 0] x";
  for (int i = 0; i < 34; ++i) expected += xun;
  CHECK(got == expected + "\x1b[K");
  CHECK(display_width(expected) == 78);  // "\r" takes no column
}
