// Log streamer: moves each rank's output from its pipe to its log file, raw
// and whole, and to a console sink as complete lines prefixed by the rank.
//
// A line redrawn with '\r' (a progress bar) reaches the console as a
// terminal would show it: the text after the last '\r', once the line ends
// ("\r\n" is an ordinary line end); meanwhile its current state goes to
// LineSink::progress(), so a bar updated thousands of times is one line.
// A redrawn line that moves the cursor up (ESC [ A: one bar of tqdm's
// nested bars) is never a line of its own, only progress. Text waiting for
// its '\n' is reported as progress too, so a row of dots shows as it grows.
//
// Memory is bounded: per rank, one partial line of at most `max_line_bytes`;
// per event loop, one StreamScratch (a 256 KiB read and its prefixed lines);
// longer lines reach the console in chunks, each continuation marked with
// "[rank N]+ ". The log file always receives the bytes exactly as written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "davincirun/console_sink.hpp"
#include "davincirun/enum_names.hpp"
#include "davincirun/unique_fd.hpp"

namespace davincirun {

/// Working memory shared by every RankLog of one event loop. Reusing it keeps
/// a flood of output from churning the allocator (and faulting in fresh
/// pages) on every read.
struct StreamScratch {
  static constexpr std::size_t default_read_bytes = std::size_t{256} * 1024;
  explicit StreamScratch(std::size_t read_bytes = default_read_bytes) : input(read_bytes) {}
  std::vector<char> input;  ///< one read(2) at most this size
  std::string console;      ///< the prefixed lines of one read
};

/// One rank's output stream: pipe → log file (raw) and console (lines).
class RankLog {
 public:
  /// Longest line passed whole to the console, in bytes (64 KiB).
  static constexpr std::size_t max_line_bytes = std::size_t{64} * 1024;
  /// Longest progress text passed to LineSink::progress(), in bytes (1 KiB;
  /// cut at a UTF-8 character boundary).
  static constexpr std::size_t max_progress_bytes = 1024;
  /// What LineSink::output() is given of each splice(2) (below): its last
  /// 8 KiB, read back from the log file's page cache; the rest of the move
  /// goes to LineSink::output_skipped().
  static constexpr std::size_t spliced_output_window = std::size_t{8} * 1024;

  /// Takes `pipe` (made non-blocking here) and creates the log file at
  /// `log_path` (O_EXCL, never following a symlink, mode 0600). `index` is
  /// the rank's index in its job, which names it to `console`; `label`
  /// prefixes its console lines: "[<label>] ". Throws SystemError when the
  /// file cannot be created.
  RankLog(std::size_t index, const std::string& label, UniqueFd pipe, std::string log_path, LineSink& console);
  RankLog(RankLog&&) noexcept = default;
  RankLog& operator=(RankLog&&) = delete;
  RankLog(const RankLog&) = delete;
  RankLog& operator=(const RankLog&) = delete;

  enum class ReadResult {
    would_block,   ///< the pipe is empty for now
    budget_spent,  ///< more may be waiting; come back after serving others
    eof,           ///< every writer closed the pipe; call finish()
  };
  /// How far read_available() goes: `available` stops as soon as a read
  /// finds the pipe emptied (epoll reports what comes after); `to_the_end`
  /// reads until the pipe says EAGAIN or end of file, for a rank that has
  /// exited, so that its last words precede the verdict on it.
  enum class Drain { available, to_the_end };
  /// Reads what the pipe holds, up to `budget` bytes, into the file and the
  /// console. When the console wants neither lines nor progress, the bytes
  /// go from the pipe to the file by splice(2), without entering this
  /// process (read(2) and write(2) take over where splice is refused); a
  /// console that wants output() gets the end of each move.
  ReadResult read_available(StreamScratch& scratch, std::size_t budget, Drain drain = Drain::available);

  /// Whether read_available() would move the bytes by splice(2): the console
  /// wants neither lines nor progress, and splice was never refused.
  bool splicing() const noexcept;
  /// What splice_some() moved.
  struct Spliced {
    ReadResult result = ReadResult::would_block;
    std::uint64_t bytes = 0;
  };
  /// The splice(2) half of read_available(), for a caller that moves several
  /// ranks' output on several threads: it touches this RankLog's pipe, file
  /// and counters only, never the console, so RankLogs of one job may each
  /// run it on a thread of their own. The caller then calls
  /// pass_spliced_end() on its loop's thread. When splice is refused,
  /// splicing() turns false and the bytes stay in the pipe for
  /// read_available().
  Spliced splice_some(std::size_t budget, Drain drain = Drain::available);
  /// Gives a console that wants output() the last spliced_output_window
  /// bytes of the `moved` bytes just spliced (read back from the log file)
  /// and counts the rest as skipped; nothing for a console that does not.
  void pass_spliced_end(StreamScratch& scratch, std::uint64_t moved);

  /// Flushes a last unterminated line to the console (adding '\n'), closes
  /// the pipe and the file. Idempotent.
  void finish();

  int pipe_fd() const noexcept { return pipe_.get(); }
  bool open() const noexcept { return static_cast<bool>(pipe_); }
  const std::string& log_path() const noexcept { return log_path_; }
  /// Bytes received from the rank (all of them reached the file unless file_error()).
  std::uint64_t bytes() const noexcept { return bytes_; }
  /// The first failure writing the file, e.g. "No space left on device at byte 1048576".
  const std::optional<std::string>& file_error() const noexcept { return file_error_; }

 private:
  void write_file(const char* data, std::size_t size);
  void emit_lines(const char* data, std::size_t size, std::string& out);
  void emit_full_chunks(std::string& out);
  void collapse_redrawn();
  void report_progress();
  static bool moves_cursor_up(std::string_view line);

  std::size_t index_;
  std::string prefix_;       // "[label] "
  std::string cont_prefix_;  // "[label]+ "
  UniqueFd pipe_;
  UniqueFd file_;
  std::string log_path_;
  LineSink* console_;
  std::string partial_;  // bytes of the current line not yet sent to the console
  bool partial_is_continuation_ = false;
  bool redrawing_ = false;           // the current line contained a '\r' (before its end)
  std::string progress_shown_;       // the last text given to LineSink::progress()
  std::string positioned_progress_;  // the last bar that moved the cursor up
  std::uint64_t bytes_ = 0;
  std::optional<std::string> file_error_;
  bool splice_ = true;  // until the file system or a failed write refuses it
  // One splice(2) moves at most this much: a full pipe of the largest size
  // a user may set without privileges (/proc/sys/fs/pipe-max-size).
  static constexpr std::size_t max_splice_bytes = std::size_t{1} << 20;
};

/// to_string(): "would_block", "budget_spent" or "eof".
DAVINCIRUN_ENUM_NAMES(RankLog::ReadResult, "would_block", "budget_spent", "eof");

/// The last `max_lines` lines of the file at `path`, reading at most
/// `max_bytes` from its end, each as a terminal shows it (a line redrawn
/// with '\r' in its last state). Empty when the file cannot be read.
std::string read_log_tail(const std::string& path, std::size_t max_lines = 20,
                          std::size_t max_bytes = std::size_t{16} * 1024);

}  // namespace davincirun
