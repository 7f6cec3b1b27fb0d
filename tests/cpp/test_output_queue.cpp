// OutputQueue: the one rule for what a console that falls behind drops, used
// by NonBlockingSink (the supervisor's console) and PolledSink (Python's).
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "davincirun/output_queue.hpp"

using davincirun::ExitStatus;
using davincirun::OutputQueue;

namespace {

// `n` lines "[rank <rank>] <first + i>\n".
std::string lines(int rank, int first, int n) {
  std::string out;
  for (int i = first; i < first + n; ++i) out += "[rank " + std::to_string(rank) + "] " + std::to_string(i) + "\n";
  return out;
}

std::uint64_t count_lines(const std::string& text) {
  return static_cast<std::uint64_t>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

TEST_CASE("within its capacity the queue gives everything back, in order", "[output_queue]") {
  OutputQueue q(1000);
  q.push_lines(0, lines(0, 0, 2));
  q.push_notice("[davincirun] n\n");
  CHECK(q.push_progress(1, "50%"));
  q.push_exit(1, ExitStatus{ExitStatus::Kind::exited, 3}, true);
  CHECK(q.line_bytes() == lines(0, 0, 2).size());
  std::vector<std::string> got;
  while (!q.empty()) {
    const OutputQueue::Entry e = q.pop();
    got.push_back(
        std::string(to_string(e.kind)) + " " + std::to_string(e.index) + " " + e.text +
        (e.kind == OutputQueue::Kind::exit ? e.status.describe() + (e.stopped_by_launcher ? " stopped" : "") : ""));
  }
  CHECK(got == std::vector<std::string>{"lines 0 " + lines(0, 0, 2), "notice 0 [davincirun] n\n", "progress 1 50%",
                                        "exit 1 exit code 3 stopped"});
  CHECK(q.line_bytes() == 0);
  CHECK(q.take_dropped() == 0);
}

TEST_CASE("over capacity, the oldest whole lines of the rank with most waiting go, and are counted", "[output_queue]") {
  OutputQueue q(200);
  q.push_lines(0, "[rank 0] quiet rank's last words\n");
  int written = 0;
  for (int i = 0; i < 50; ++i, written += 5) q.push_lines(1, lines(1, written, 5));
  q.push_notice("[davincirun] never dropped\n");
  CHECK(q.line_bytes() <= 200);
  const std::uint64_t dropped = q.take_dropped();
  CHECK(dropped > 0);
  CHECK(q.take_dropped() == 0);  // counted once
  const std::string text = q.take_lines(std::string::npos);
  CHECK(text.rfind("[rank 0] quiet rank's last words\n", 0) == 0);
  CHECK(text.find("[rank 1] 249\n") != std::string::npos);  // the newest of the flood
  CHECK(text.find("[rank 1] 0\n") == std::string::npos);
  CHECK(text.find("[davincirun] never dropped\n") != std::string::npos);
  CHECK(count_lines(text) - 2 + dropped == static_cast<std::uint64_t>(written));  // shown + dropped = written
}

TEST_CASE("one block larger than the capacity keeps its newest lines", "[output_queue]") {
  OutputQueue q(50);
  const std::string block = lines(2, 0, 20);
  q.push_lines(2, block);
  const std::string kept = q.pop().text;
  REQUIRE(!kept.empty());
  CHECK(kept.size() <= 50);
  CHECK(block.compare(block.size() - kept.size(), kept.size(), kept) == 0);  // the newest lines...
  CHECK(block[block.size() - kept.size() - 1] == '\n');                      // ...whole
  CHECK(q.take_dropped() == count_lines(block) - count_lines(kept));
}

TEST_CASE("a progress update that does not fit is refused, a smaller capacity drops at once", "[output_queue]") {
  OutputQueue q(40);
  q.push_lines(0, lines(0, 0, 3));  // 3 lines of 11 bytes
  CHECK_FALSE(q.push_progress(0, "0123456789"));
  CHECK(q.push_progress(0, "1234567"));
  q.set_capacity(12);
  CHECK(q.line_bytes() <= 12);
  CHECK(q.take_dropped() == 2);
}

TEST_CASE("take_lines: whole lines up to the budget, notices with them, one line at least", "[output_queue]") {
  OutputQueue q(1000);
  q.push_lines(0, lines(0, 0, 4));  // 11 bytes each
  q.push_notice("[davincirun] n\n");
  q.push_lines(1, lines(1, 0, 1));
  CHECK(q.take_lines(25) == lines(0, 0, 2));
  CHECK(q.take_lines(5) == lines(0, 2, 1));  // more than the budget, but one line
  CHECK(q.take_lines(100) == lines(0, 3, 1) + "[davincirun] n\n" + lines(1, 0, 1));
  CHECK(q.empty());
  q.push_exit(0, ExitStatus{}, false);
  CHECK(q.take_lines(100).empty());  // stops at an exit, which pop() takes
  CHECK_FALSE(q.empty());
}

TEST_CASE("a large block landing on a full queue keeps its newest lines, and the others keep theirs",
          "[output_queue]") {
  // The queue is full of three ranks' lines when rank 3's whole burst comes
  // in one block, its last words at the end: every rank keeps its newest
  // lines, the shares even out (before, all of rank 3 was dropped).
  OutputQueue q(120);
  for (int rank = 0; rank < 3; ++rank) q.push_lines(static_cast<std::size_t>(rank), lines(rank, 0, 4));
  const std::string burst = lines(3, 0, 30) + "[rank 3] last words\n";
  q.push_lines(3, burst);
  const std::string text = q.take_lines(std::string::npos);
  CHECK(text.find("[rank 3] last words\n") != std::string::npos);
  for (int rank = 0; rank < 3; ++rank) {
    CHECK(text.find("[rank " + std::to_string(rank) + "] 3\n") != std::string::npos);  // each rank's newest
  }
  CHECK(text.size() <= 120);
  CHECK(count_lines(text) + q.take_dropped() == 3 * 4 + 31);
}
