// The small shared helpers every stage uses: how commands, signals, times,
// enums, console prefixes and log file names are written, where text may be
// cut, and what /proc says of a process.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/proc.hpp"
#include "common/text.hpp"
#include "davincirun/davincirun.hpp"
#include "test_support.hpp"

using namespace davincirun;
using namespace davincirun::detail;

TEST_CASE("shell_quote writes what a shell reads back, cut at a limit", "[helpers]") {
  CHECK(shell_quote({"python", "train.py", "--lr=0.1", "a/b.c@d%e+f,g:h"}) ==
        "python train.py --lr=0.1 a/b.c@d%e+f,g:h");
  CHECK(shell_quote({"python", "-c", "print('hi')", "", "a b"}) == R"(python -c 'print('\''hi'\'')' '' 'a b')");
  CHECK(shell_quote({}).empty());
  CHECK(shell_quote({"abcdef", "ghij"}, 8) == "abcdef g...");
  CHECK(shell_quote({"abc"}, 3) == "abc");
}

TEST_CASE("signal_name names the standard signals by their macro, nothing else", "[helpers]") {
  CHECK(std::string(signal_name(SIGTERM)) == "TERM");
  CHECK(std::string(signal_name(SIGKILL)) == "KILL");
  CHECK(std::string(signal_name(SIGSEGV)) == "SEGV");
  CHECK(std::string(signal_name(SIGUSR1)) == "USR1");
  CHECK(signal_name(0) == nullptr);
  CHECK(signal_name(SIGRTMIN) == nullptr);
  CHECK(ExitStatus{ExitStatus::Kind::signaled, SIGABRT}.describe() ==
        "signal " + std::to_string(SIGABRT) + " (SIGABRT)");
  CHECK(ExitStatus{ExitStatus::Kind::signaled, SIGRTMIN + 1}.describe() == "signal " + std::to_string(SIGRTMIN + 1));
}

TEST_CASE("utc_time formats in UTC, printable hides control characters", "[helpers]") {
  CHECK(utc_time(0, "%Y%m%d-%H%M%S") == "19700101-000000");
  CHECK(utc_time(1'700'000'000, "%Y-%m-%dT%H:%M:%SZ") == "2023-11-14T22:13:20Z");
  CHECK(printable("a\x1b[31mb\nc\x7f\xc3\xa9") == "a?[31mb?c?\xc3\xa9");
}

TEST_CASE("utf8_prefix_length cuts at a byte bound, never inside a UTF-8 sequence", "[helpers]") {
  const std::string text = "ab\xC3\xA9\xE4\xB8\xAD!";  // "ab", U+00E9 (2 bytes), U+4E2D (3 bytes), "!"
  CHECK(utf8_prefix_length(text, 100) == text.size());
  CHECK(utf8_prefix_length(text, text.size()) == text.size());
  CHECK(utf8_prefix_length(text, 2) == 2);
  CHECK(utf8_prefix_length(text, 3) == 2);  // inside U+00E9
  CHECK(utf8_prefix_length(text, 4) == 4);
  CHECK(utf8_prefix_length(text, 5) == 4);  // inside U+4E2D
  CHECK(utf8_prefix_length(text, 6) == 4);
  CHECK(utf8_prefix_length(text, 7) == 7);
  CHECK(utf8_prefix_length(text, 0) == 0);
  CHECK(utf8_prefix_length("\x80\x80\x80", 2) == 0);  // continuation bytes only
  CHECK(utf8_prefix_length("", 0) == 0);
}

TEST_CASE("read_proc_stat and parent_pid read /proc, also for a name with spaces and parentheses", "[helpers]") {
  const auto self = read_proc_stat(::getpid());
  REQUIRE(self);
  CHECK(self->ppid == ::getppid());
  CHECK_FALSE(self->zombie());
  CHECK(parent_pid(::getpid()) == std::optional<pid_t>(::getppid()));
  CHECK_FALSE(read_proc_stat(0));
  CHECK_FALSE(parent_pid(-1));
  // A child whose command name holds ") S 1 (" reports its real parent.
  davincirun_test::TempDir dir;
  const std::string odd = dir / "x) S 1 (y";
  REQUIRE(::symlink(davincirun_test::helper("child_sleep").c_str(), odd.c_str()) == 0);
  ProcessSpec spec;
  spec.argv = {odd, "30"};
  spec.capture_output = false;
  ChildProcess child = ChildProcess::spawn(spec, 0);
  CHECK(parent_pid(child.pid()) == std::optional<pid_t>(::getpid()));
  child.signal_group(SIGKILL);
  child.reap();
  const auto pids = list_processes();
  CHECK(std::find(pids.begin(), pids.end(), ::getpid()) != pids.end());
}

TEST_CASE("every public enum has a to_string", "[helpers]") {
  CHECK(std::string(to_string(RankTableFormat::v0_1)) == "0.1");
  CHECK(std::string(to_string(RankTableError::Kind::bad_value)) == "bad_value");
  CHECK(std::string(to_string(RankTableError::Kind::unsupported)) == "unsupported");
  CHECK(std::string(to_string(ExitStatus::Kind::signaled)) == "signaled");
  CHECK(std::string(to_string(ProcessTracking::sigchld)) == "sigchld");
  CHECK(std::string(to_string(StopReason::timed_out)) == "timed_out");
  CHECK(std::string(to_string(StopReason::rank_failed)) == "rank_failed");
  CHECK(std::string(to_string(ConsoleTarget::stdio)) == "stdio");
  CHECK(std::string(to_string(OutputQueue::Kind::progress)) == "progress");
  CHECK(std::string(to_string(RankLog::ReadResult::budget_spent)) == "budget_spent");
}

TEST_CASE("console prefixes and log file names come from one place each", "[helpers]") {
  CHECK(rank_label(3) == "rank 3");
  CHECK(notice_line("stopping") == "[davincirun] stopping\n");
  CHECK(line_text("[rank 3] hello") == "hello");
  CHECK(line_text("[rank 3]+ continued") == "continued");
  CHECK(line_text("no prefix") == "no prefix");
  RankAssignment a;
  a.rank = 12;
  a.physical_device_id = 4;
  CHECK(rank_log_file_name(a) == "rank_12.device_4.log");
}
