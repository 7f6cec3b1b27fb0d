// A log read back as a terminal showed it: the end of the file, each line
// redrawn with '\r' in its last state (output/log_tail.hpp), and
// read_log_tail() built on them.
#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "davincirun/log_streamer.hpp"
#include "output/log_tail.hpp"
#include "test_support.hpp"

using namespace davincirun;
using namespace davincirun::detail;
using namespace davincirun_test;
using Catch::Matchers::Contains;

TEST_CASE("shown_line keeps what a terminal shows: the text after the last carriage return", "[log_tail]") {
  CHECK(shown_line("plain") == "plain");
  CHECK(shown_line("") == "");
  CHECK(shown_line("10%\r20%\r30%") == "30%");
  CHECK(shown_line("done\r") == "done");  // print(x, end="\r"): x stays shown
  CHECK(shown_line("a\rdone\r\r") == "done");
  CHECK(shown_line("\r\r") == "");
  CHECK(shown_line("line\r") == "line");  // the '\r' of "\r\n"
  const std::string_view line = "x\ry";
  CHECK(shown_line(line).data() == line.data() + 2);  // a view into the line
}

TEST_CASE("shown_lines splits the lines, each as shown", "[log_tail]") {
  using Lines = std::vector<std::string_view>;
  CHECK(shown_lines("") == Lines{});
  CHECK(shown_lines("a\nb") == Lines{"a", "b"});
  CHECK(shown_lines("a\nb\n") == Lines{"a", "b"});
  CHECK(shown_lines("a\n\nb") == Lines{"a", "", "b"});
  CHECK(shown_lines("\n") == Lines{""});
  CHECK(shown_lines("start\r\n1/3\r2/3\r3/3\nend\r") == Lines{"start", "3/3", "end"});
}

TEST_CASE("read_log_end reads the last bytes of a file and says whether it was cut", "[log_tail]") {
  TempDir dir;
  write_file(dir / "a.log", "one\ntwo\nthree\n");
  const LogEnd whole = read_log_end(dir / "a.log", 1024);
  CHECK(whole.text == "one\ntwo\nthree\n");
  CHECK_FALSE(whole.cut);
  const LogEnd end = read_log_end(dir / "a.log", 8);
  CHECK(end.text == "o\nthree\n");
  CHECK(end.cut);
  CHECK(read_log_end(dir / "a.log", 14).cut == false);
  write_file(dir / "empty.log", "");
  CHECK(read_log_end(dir / "empty.log", 8).text.empty());
  CHECK(read_log_end(dir / "missing.log", 8).text.empty());
  CHECK(read_log_end(dir.path(), 8).text.empty());  // a directory
}

TEST_CASE("read_log_tail returns the last lines of a log", "[log_tail]") {
  TempDir dir;
  std::string numbers;
  for (int i = 1; i <= 30; ++i) numbers += std::to_string(i) + "\n";
  write_file(dir / "numbers.log", numbers);
  write_file(dir / "unterminated.log", "a\nb\nc");
  write_file(dir / "empty.log", "");
  // Whether the tail keeps the file's final '\n' is not part of the contract.
  auto tail = [](const std::string& path, std::size_t lines, std::size_t max_bytes = 16 * 1024) {
    std::string t = read_log_tail(path, lines, max_bytes);
    if (!t.empty() && t.back() == '\n') t.pop_back();
    return t;
  };

  std::string last20;
  for (int i = 11; i <= 30; ++i) last20 += std::to_string(i) + (i < 30 ? "\n" : "");
  CHECK(tail(dir / "numbers.log", 20) == last20);
  std::string by_default = read_log_tail(dir / "numbers.log");
  if (!by_default.empty() && by_default.back() == '\n') by_default.pop_back();
  CHECK(by_default == last20);
  CHECK(tail(dir / "numbers.log", 3) == "28\n29\n30");
  CHECK(tail(dir / "numbers.log", 1) == "30");
  CHECK(tail(dir / "numbers.log", 100) == numbers.substr(0, numbers.size() - 1));
  CHECK(tail(dir / "unterminated.log", 2) == "b\nc");
  // At most max_bytes are read from the end.
  const std::string limited = read_log_tail(dir / "numbers.log", 100, 9);
  CHECK(limited.size() <= 9);
  CHECK_THAT(numbers, Contains(limited));
  CHECK(tail(dir / "empty.log", 5) == "");
  CHECK(read_log_tail(dir / "missing.log") == "");
  CHECK(read_log_tail(dir.path()) == "");  // a directory
}

TEST_CASE("read_log_tail shows redrawn lines in their last state", "[log_tail]") {
  TempDir dir;
  std::string bar;
  for (int i = 1; i <= 5000; ++i) bar += "\rstep " + std::to_string(i) + "/5000";
  write_file(dir / "bar.log", "start\r\n" + bar + "\nTraceback: boom\r\nold\rnew");
  CHECK(read_log_tail(dir / "bar.log", 3, 1 << 20) == "step 5000/5000\nTraceback: boom\nnew");
  // Cut by max_bytes in the middle of the redraws: still only the last state.
  CHECK(read_log_tail(dir / "bar.log", 20, 4096) == "step 5000/5000\nTraceback: boom\nnew");
}

TEST_CASE("read_log_tail with max_lines 0 returns nothing", "[log_tail]") {
  TempDir dir;
  write_file(dir / "a.log", "one\ntwo\n");
  std::string tail;
  CHECK_NOTHROW(tail = read_log_tail(dir / "a.log", 0));
  CHECK(tail == "");
}
