// PolledSink, the queue between a job and the Python thread that shows its
// output: pacing by a byte budget, the newest lines kept when it overflows,
// notices never dropped, and what each rank said last.
#include <catch2/catch.hpp>

#include <string>

#include "davincirun/log_streamer.hpp"
#include "davincirun/polled_sink.hpp"

using davincirun::ExitStatus;
using davincirun::PolledSink;
using davincirun::RankLog;

namespace {

// `n` lines "[rank <rank>] line <first + i>" (each 16-20 bytes).
std::string lines(int rank, int first, int n) {
  std::string out;
  for (int i = first; i < first + n; ++i) out += "[rank " + std::to_string(rank) + "] line " + std::to_string(i) + "\n";
  return out;
}

}  // namespace

TEST_CASE("without a budget everything is taken at once, in order", "[polled_sink]") {
  PolledSink q;
  q.write(0, lines(0, 0, 3));
  q.notice("[davincirun] a notice\n");
  q.write(1, lines(1, 0, 2));
  const PolledSink::Batch b = q.take(false);
  CHECK(b.lines == lines(0, 0, 3) + "[davincirun] a notice\n" + lines(1, 0, 2));
  CHECK(b.skipped_lines == 0);
  CHECK(q.take(false).lines.empty());
}

TEST_CASE("a budget paces whole lines over several takes, `everything` takes the rest", "[polled_sink]") {
  PolledSink q;
  q.set_budget(40);
  q.write(0, lines(0, 0, 6));  // 6 lines of 17 bytes
  CHECK(q.take(false).lines == lines(0, 0, 2));
  CHECK(q.take(false).lines == lines(0, 2, 2));
  q.notice("[davincirun] stop\n");
  CHECK(q.take(true).lines == lines(0, 4, 2) + "[davincirun] stop\n");
}

TEST_CASE("a line longer than the budget is taken alone", "[polled_sink]") {
  PolledSink q;
  q.set_budget(10);
  const std::string long_line = "[rank 0] " + std::string(100, 'x') + "\n";
  q.write(0, long_line + lines(0, 0, 1));
  CHECK(q.take(false).lines == long_line);
  CHECK(q.take(false).lines == lines(0, 0, 1));
}

TEST_CASE("over the hold the oldest lines are dropped and counted, notices stay", "[polled_sink]") {
  PolledSink q;
  q.set_budget(1000);  // holds 1000 + max_line_bytes + 64 bytes of lines
  const std::size_t hold = 1000 + RankLog::max_line_bytes + 64;
  q.notice("[davincirun] first notice\n");
  int written = 0;
  std::size_t bytes = 0;
  while (bytes < 3 * hold) {
    const std::string block = lines(written % 2, written, 100);
    q.write(static_cast<std::size_t>(written % 2), block);
    bytes += block.size();
    written += 100;
  }
  q.write(1, "[rank 1] last words\n");
  const PolledSink::Batch b = q.take(true);
  // The notice and the newest lines are there, the last words included.
  CHECK(b.lines.rfind("[davincirun] first notice\n", 0) == 0);
  CHECK(b.lines.size() <= hold + 26);
  CHECK(b.lines.substr(b.lines.size() - 20) == "[rank 1] last words\n");
  // Every line is either shown or counted.
  const auto shown = static_cast<std::uint64_t>(std::count(b.lines.begin(), b.lines.end(), '\n')) - 1;
  CHECK(shown + b.skipped_lines == static_cast<std::uint64_t>(written) + 1);
  CHECK(b.skipped_lines > 0);
}

TEST_CASE("the rank with the most waiting loses its oldest lines first", "[polled_sink]") {
  PolledSink q;
  q.set_budget(1000);
  q.write(0, "[rank 0] last words of a quiet rank\n");
  for (int i = 0; i < 2000; ++i)
    q.write(static_cast<std::size_t>(1 + i % 3), lines(1 + i % 3, i * 10, 10));  // ranks 1-3 flood
  const PolledSink::Batch b = q.take(true);
  CHECK(b.lines.rfind("[rank 0] last words of a quiet rank\n", 0) == 0);
  CHECK(b.skipped_lines > 0);
  for (int rank = 1; rank <= 3; ++rank) {
    // Each flooding rank keeps its newest lines.
    int newest = 1999;
    while (1 + newest % 3 != rank) --newest;
    CHECK_THAT(b.lines, Catch::Matchers::Contains("[rank " + std::to_string(rank) + "] line " +
                                                  std::to_string(newest * 10 + 9) + "\n"));
  }
}

TEST_CASE("last lines, progress and exits come with every take, also without lines", "[polled_sink]") {
  PolledSink q;
  q.write(0, "[rank 0] one\n[rank 0] two\n");
  q.write(3, "[rank 3]+ continued\n");
  q.progress(3, "10%");
  q.progress(3, "20%");
  q.rank_exited(1, ExitStatus{ExitStatus::Kind::exited, 2}, false);
  PolledSink::Batch b = q.take(false, false);
  CHECK(b.lines.empty());
  CHECK(b.last_lines == std::vector<std::pair<std::size_t, std::string>>{{0, "two"}, {3, "continued"}});
  CHECK(b.progress == std::vector<std::pair<std::size_t, std::string>>{{3, "20%"}});
  REQUIRE(b.exits.size() == 1);
  CHECK((b.exits[0].index == 1 && b.exits[0].status.value == 2));
  // The lines waited.
  b = q.take(false);
  CHECK(b.lines == "[rank 0] one\n[rank 0] two\n[rank 3]+ continued\n");
  CHECK(b.last_lines.empty());
}
