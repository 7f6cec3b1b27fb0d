// Log streamer: RankLog fed through a pipe this test writes to itself; the
// log file must hold the exact bytes, the console complete prefixed lines.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <limits>

#include "davincirun/errors.hpp"
#include "davincirun/log_streamer.hpp"
#include "test_support.hpp"

using namespace davincirun;
using namespace davincirun_test;
using Catch::Matchers::Contains;

namespace {

// A pipe: `read_fd` goes to the RankLog (which owns it from then on); the
// write end is ours and closed on destruction.
struct Pipe {
  Pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2");
    read_fd = fds[0];
    write_fd = fds[1];
  }
  ~Pipe() { close_write(); }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  void close_write() {
    if (write_fd >= 0) ::close(write_fd);
    write_fd = -1;
  }
  int read_fd = -1;
  int write_fd = -1;
};

constexpr std::size_t no_budget_limit = std::numeric_limits<std::size_t>::max();

// Reads until the pipe is empty (or at its end).
RankLog::ReadResult drain(RankLog& log, StreamScratch& buffer) {
  RankLog::ReadResult r;
  do {
    r = log.read_available(buffer, no_budget_limit);
  } while (r == RankLog::ReadResult::budget_spent);
  return r;
}

// Writes `data` in pieces of `piece` bytes (at most the pipe's capacity),
// draining after each, so the writer never blocks.
void feed(Pipe& pipe, RankLog& log, StreamScratch& buffer, const std::string& data, std::size_t piece) {
  for (std::size_t done = 0; done < data.size();) {
    const ssize_t n = ::write(pipe.write_fd, data.data() + done, std::min(piece, data.size() - done));
    REQUIRE(n > 0);
    done += static_cast<std::size_t>(n);
    REQUIRE(drain(log, buffer) == RankLog::ReadResult::would_block);
  }
}

// Closes the write end, reads to the end and finishes the log.
void end_stream(Pipe& pipe, RankLog& log, StreamScratch& buffer) {
  pipe.close_write();
  REQUIRE(drain(log, buffer) == RankLog::ReadResult::eof);
  log.finish();
}

}  // namespace

TEST_CASE("raw bytes reach the log file unchanged, the console gets prefixed whole lines", "[log_streamer]") {
  TempDir dir;
  RecordingSink console;
  Pipe pipe;
  StreamScratch buffer(4096);
  RankLog log(0, "rank 0", UniqueFd(pipe.read_fd), dir / "rank_0.log", console);
  CHECK(log.open());
  CHECK(log.log_path() == dir / "rank_0.log");

  const std::string first = std::string("plain\n") + std::string("nul\0byte\n", 9) + "bad utf-8 \xff\xfe\xc3\n" +
                            "crlf\r\n" + "\x1b[31mred\x1b[0m\n" + "partial-";
  feed(pipe, log, buffer, first, first.size());
  CHECK_THAT(console.text(), !Contains("partial"));  // held back until its end arrives
  const std::string second = "end\nunterminated";
  feed(pipe, log, buffer, second, second.size());
  CHECK_THAT(console.text(), !Contains("unterminated"));
  end_stream(pipe, log, buffer);

  CHECK(read_file(dir / "rank_0.log") == first + second);
  CHECK(log.bytes() == first.size() + second.size());
  CHECK_FALSE(log.file_error());
  const std::string expected = std::string("[rank 0] plain\n") + std::string("[rank 0] nul\0byte\n", 18) +
                               "[rank 0] bad utf-8 \xff\xfe\xc3\n" + "[rank 0] crlf\n" +
                               "[rank 0] \x1b[31mred\x1b[0m\n" + "[rank 0] partial-end\n" +
                               "[rank 0] unterminated\n";  // '\n' added at finish()
  CHECK(console.text() == expected);
  for (const auto& call : console.calls()) CHECK((!call.empty() && call.back() == '\n'));

  CHECK_FALSE(log.open());
  log.finish();  // idempotent
  CHECK(console.text() == expected);
}

TEST_CASE("a line longer than max_line_bytes reaches the console in marked chunks", "[log_streamer]") {
  TempDir dir;
  RecordingSink console;
  Pipe pipe;
  constexpr std::size_t max = RankLog::max_line_bytes;
  std::string line;
  for (std::size_t i = 0; i < 2 * max + 1000; ++i) line += static_cast<char>('a' + i % 26);

  StreamScratch buffer(0);
  std::size_t piece = 0;
  SECTION("read in small pieces") {
    buffer.input.resize(4096);
    piece = 10000;
  }
  SECTION("read at once") {
    REQUIRE(::fcntl(pipe.write_fd, F_SETPIPE_SZ, 1 << 20) >= static_cast<int>(3 * max));
    buffer.input.resize(1 << 20);
    piece = 1 << 20;
  }
  RankLog log(0, "r", UniqueFd(pipe.read_fd), dir / "r.log", console);
  const std::string data = line + "\nnext\n" + line.substr(0, max + 5);
  feed(pipe, log, buffer, data, piece);
  end_stream(pipe, log, buffer);

  CHECK((read_file(dir / "r.log") == data));
  CHECK(log.bytes() == data.size());
  const std::string expected = "[r] " + line.substr(0, max) + "\n" + "[r]+ " + line.substr(max, max) + "\n" + "[r]+ " +
                               line.substr(2 * max) + "\n" + "[r] next\n" +
                               // an overlong unterminated last line: chunks, the rest at finish()
                               "[r] " + line.substr(0, max) + "\n" + "[r]+ " + line.substr(max, 5) + "\n";
  const std::string text = console.text();
  CHECK(text.size() == expected.size());
  CHECK((text == expected));  // not CHECK(a == b): 200 KB in a failure message
}

TEST_CASE("a line of exactly max_line_bytes is passed whole", "[log_streamer]") {
  TempDir dir;
  RecordingSink console;
  Pipe pipe;
  StreamScratch buffer(4096);
  RankLog log(0, "r", UniqueFd(pipe.read_fd), dir / "r.log", console);
  const std::string line(RankLog::max_line_bytes, 'x');
  feed(pipe, log, buffer, line + "\n", 10000);
  end_stream(pipe, log, buffer);
  CHECK((console.text() == "[r] " + line + "\n"));
}

TEST_CASE("read_available stops after its budget and resumes where it stopped", "[log_streamer]") {
  TempDir dir;
  RecordingSink console;
  Pipe pipe;
  StreamScratch buffer(1000);
  RankLog log(0, "r", UniqueFd(pipe.read_fd), dir / "r.log", console);
  std::string data;
  for (int i = 0; i < 1000; ++i) data += "line " + std::to_string(i) + "\n";  // < 64 KiB
  REQUIRE(::write(pipe.write_fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()));

  CHECK(log.read_available(buffer, 3000) == RankLog::ReadResult::budget_spent);
  CHECK(log.bytes() >= 3000);
  CHECK(log.bytes() < data.size());
  CHECK(drain(log, buffer) == RankLog::ReadResult::would_block);
  CHECK(log.bytes() == data.size());
  end_stream(pipe, log, buffer);
  CHECK(read_file(dir / "r.log") == data);
  CHECK(RecordingSink::occurrences(console.text(), "[r] line ") == 1000);
}

TEST_CASE("the log file is created private and never over an existing path or symlink", "[log_streamer]") {
  TempDir dir;
  NullLineSink console;

  SECTION("created with mode 0600") {
    Pipe pipe;
    RankLog log(0, "r", UniqueFd(pipe.read_fd), dir / "new.log", console);
    struct stat st{};
    REQUIRE(::lstat((dir / "new.log").c_str(), &st) == 0);
    CHECK(S_ISREG(st.st_mode));
    CHECK((st.st_mode & 07777) == 0600);
  }

  std::string path;
  std::string target_before;
  SECTION("refuses an existing file") {
    path = dir / "old.log";
    write_file(path, "older run\n");
  }
  SECTION("refuses a symlink to an existing file") {
    write_file(dir / "target", "precious\n");
    path = dir / "link.log";
    REQUIRE(::symlink((dir / "target").c_str(), path.c_str()) == 0);
  }
  SECTION("refuses a dangling symlink") {
    path = dir / "dangling.log";
    REQUIRE(::symlink((dir / "nowhere").c_str(), path.c_str()) == 0);
  }
  if (!path.empty()) {
    const std::string before = read_file(path);
    Pipe pipe;
    try {
      RankLog log(0, "r", UniqueFd(pipe.read_fd), path, console);
      FAIL("RankLog accepted " << path);
    } catch (const SystemError& e) {
      CHECK(e.os_errno() == EEXIST);
      CHECK_THAT(e.what(), Contains(path));
    }
    CHECK(read_file(path) == before);
    CHECK(::access((dir / "nowhere").c_str(), F_OK) != 0);
    // The pipe was handed over: RankLog closed it even though it failed.
    CHECK(::fcntl(pipe.read_fd, F_GETFD) == -1);
  }
}

TEST_CASE("FdLineSink writes lines to its descriptor", "[log_streamer]") {
  Pipe pipe;
  FdLineSink sink(pipe.write_fd);
  sink.write(0, "[rank 0] one\n[rank 1] two\n");
  CHECK_FALSE(sink.broken());
  pipe.close_write();
  char got[64] = {};
  const ssize_t n = ::read(pipe.read_fd, got, sizeof got);
  ::close(pipe.read_fd);
  CHECK(std::string(got, n > 0 ? static_cast<std::size_t>(n) : 0) == "[rank 0] one\n[rank 1] two\n");
}

TEST_CASE("FdLineSink on a pipe nobody reads becomes broken instead of failing", "[log_streamer]") {
  SignalDisposition no_sigpipe(SIGPIPE, SIG_IGN);  // as the CLI and Python set it
  Pipe pipe;
  ::close(pipe.read_fd);
  FdLineSink sink(pipe.write_fd);
  sink.write(0, "[rank 0] nobody listens\n");
  CHECK(sink.broken());
  sink.write(0, "[rank 0] still nobody\n");  // silently dropped
  CHECK(sink.broken());
}

TEST_CASE("with no console lines wanted, the bytes go to the file without entering the process", "[log_streamer]") {
  TempDir dir;
  NullLineSink console;
  Pipe pipe;
  StreamScratch buffer(4096);
  std::fill(buffer.input.begin(), buffer.input.end(), '\x5a');
  RankLog log(0, "r", UniqueFd(pipe.read_fd), dir / "r.log", console);
  std::string data;
  for (int i = 0; data.size() < (std::size_t{3} << 20); ++i) data += "line " + std::to_string(i) + " \x01\xff\r\n";
  feed(pipe, log, buffer, data, 60000);
  end_stream(pipe, log, buffer);
  CHECK(read_file(dir / "r.log") == data);
  CHECK(log.bytes() == data.size());
  CHECK_FALSE(log.file_error());
  // splice(2) moved them: the read buffer was never written.
  CHECK(std::all_of(buffer.input.begin(), buffer.input.end(), [](char c) { return c == '\x5a'; }));
}

// A watch of the output that wants no lines: what output() and output_skipped() say, in order.
struct OutputWatch final : LineSink {
  void write(std::size_t, std::string_view) override {}
  void notice(std::string_view) override {}
  bool wants_lines() const noexcept override { return false; }
  void output(std::size_t, std::string_view bytes) override { seen.push_back({0, std::string(bytes)}); }
  void output_skipped(std::size_t, std::size_t bytes) override { seen.push_back({bytes, {}}); }
  bool wants_output() const noexcept override { return true; }
  std::vector<std::pair<std::size_t, std::string>> seen;  // (skipped, or 0 and the bytes given)
};

TEST_CASE("spliced output reaches a watch as the end of each move and the count of the rest", "[log_streamer]") {
  TempDir dir;
  OutputWatch watch;
  Pipe pipe;
  StreamScratch buffer(64 * 1024);
  RankLog log(0, "r", UniqueFd(pipe.read_fd), dir / "r.log", watch);
  std::string data;
  for (int i = 0; data.size() < (std::size_t{3} << 20); ++i) data += "step " + std::to_string(i) + "/999999\n";
  feed(pipe, log, buffer, data, 60000);
  end_stream(pipe, log, buffer);
  CHECK(read_file(dir / "r.log") == data);
  // Every byte accounted for, in order; each look at most the window, and always the end of a move.
  std::size_t at = 0;
  bool skipped_before = false;
  for (const auto& [skipped, bytes] : watch.seen) {
    if (skipped > 0) {
      at += skipped;
      skipped_before = true;
      continue;
    }
    CHECK(skipped_before);  // 60,000-byte moves: each is more than the window
    CHECK(bytes.size() == RankLog::spliced_output_window);
    REQUIRE(bytes == data.substr(at, bytes.size()));
    at += bytes.size();
    skipped_before = false;
  }
  CHECK(at == data.size());
}

TEST_CASE("a write that fails under splice is reported as read and write report it", "[log_streamer]") {
  TempDir dir;
  NullLineSink console;
  Pipe pipe;
  StreamScratch buffer(4096);
  RankLog log(0, "r", UniqueFd(pipe.read_fd), dir / "r.log", console);
  // The file may not grow past 64 KiB (EFBIG; SIGXFSZ ignored meanwhile).
  struct sigaction ignore{};
  struct sigaction old_action{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGXFSZ, &ignore, &old_action);
  struct rlimit old_limit{};
  ::getrlimit(RLIMIT_FSIZE, &old_limit);
  struct rlimit limit = old_limit;
  limit.rlim_cur = 65536;
  ::setrlimit(RLIMIT_FSIZE, &limit);
  const std::string data(200000, 'x');
  for (std::size_t done = 0; done < data.size(); done += 50000) {
    REQUIRE(::write(pipe.write_fd, data.data() + done, 50000) == 50000);
    // A splice cut short by the limit leaves bytes in the pipe (epoll would
    // report them again): read on to the end of what is there.
    REQUIRE(log.read_available(buffer, no_budget_limit, RankLog::Drain::to_the_end) ==
            RankLog::ReadResult::would_block);
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::sigaction(SIGXFSZ, &old_action, nullptr);
  end_stream(pipe, log, buffer);
  CHECK(log.bytes() == data.size());  // every byte was taken from the pipe: the rank never blocks
  CHECK(read_file(dir / "r.log") == data.substr(0, 65536));
  REQUIRE(log.file_error());
  CHECK(*log.file_error() == "File too large at byte 65536");
}

TEST_CASE("a read stops at an emptied pipe unless told to read to the end", "[log_streamer]") {
  TempDir dir;
  RecordingSink console;
  Pipe pipe;
  StreamScratch buffer(4096);
  RankLog log(0, "r", UniqueFd(pipe.read_fd), dir / "r.log", console);
  REQUIRE(::write(pipe.write_fd, "last words\n", 11) == 11);
  pipe.close_write();
  SECTION("available: the end of file waits for the next call") {
    CHECK(log.read_available(buffer, no_budget_limit) == RankLog::ReadResult::would_block);
    CHECK(console.text() == "[r] last words\n");
    CHECK(log.read_available(buffer, no_budget_limit) == RankLog::ReadResult::eof);
  }
  SECTION("to_the_end: the words and the end of file in one call") {
    CHECK(log.read_available(buffer, no_budget_limit, RankLog::Drain::to_the_end) == RankLog::ReadResult::eof);
    CHECK(console.text() == "[r] last words\n");
  }
  log.finish();
  CHECK(read_file(dir / "r.log") == "last words\n");
}
