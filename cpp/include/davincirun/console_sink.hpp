// Console sinks: where the ranks' live lines and the launcher's notices go.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "davincirun/process.hpp"

namespace davincirun {

/// Where console output goes. Every call is made from the thread running the
/// event loop; write() and notice() receive one or more complete lines (each
/// ending in '\n').
class LineSink {
 public:
  virtual ~LineSink() = default;
  /// The ranks' output, each line prefixed by its rank.
  virtual void write(std::string_view lines) = 0;
  /// The launcher's own messages ("[davincirun] rank 3 failed..."); by
  /// default they go where the ranks' lines go.
  virtual void notice(std::string_view lines) { write(lines); }
  /// false when write() discards everything: the streamer then skips
  /// splitting the output into prefixed lines at all.
  virtual bool wants_lines() const noexcept { return true; }
  /// What a rank's current, unfinished line shows now: a line it keeps
  /// redrawing with '\r' (a progress bar such as tqdm's), or text still
  /// waiting for its '\n'. `label` is the rank's label (e.g. "rank 3"),
  /// `text` at most RankLog::max_progress_bytes, without '\n'. An empty
  /// `text` means the line was finished (its final state came through
  /// write()) or the rank's output ended. Called at most once per read of
  /// the rank's output, and only when the text changed. Default: ignored (a
  /// terminal shows finished lines only).
  virtual void progress(std::string_view /*label*/, std::string_view /*text*/) {}
  /// true when progress() is used; false (default) spares the streamer the work.
  virtual bool wants_progress() const noexcept { return false; }
  /// Rank number `index` (its position in the job, 0-based) has exited with
  /// `status`; `stopped_by_launcher`: it had been sent SIGTERM by the launcher
  /// first. Called after the rank's last lines. Default: ignored.
  virtual void rank_exited(std::size_t /*index*/, ExitStatus /*status*/, bool /*stopped_by_launcher*/) {}
};

/// The label of console lines "[<label>] text" or "[<label>]+ text" (e.g.
/// "rank 3"): what is between the leading '[' and the first ']'. Empty when
/// `lines` does not start with a label.
std::string_view line_label(std::string_view lines) noexcept;

/// The ANSI colour (SGR parameter) of `rank`'s prefix: a cycle of six that
/// avoids red, green and yellow, which mean failure, success and warning.
const char* rank_colour(int rank) noexcept;

/// `lines` with each "[rank N]" (or "[rank N]+") prefix in its rank's colour
/// and each "[davincirun]" prefix in bold, as ANSI escape sequences.
std::string colourize_prefixes(std::string_view lines);

/// Writes the ranks' lines to `fd` (e.g. 1, the terminal; -1 = nowhere) and
/// notices to `notice_fd` (e.g. 2; -1 = `fd` too). A closed reader (EPIPE)
/// silences that stream; the ranks and their log files carry on. With
/// `colour` (lines) and `notice_colour` (notices), prefixes are coloured
/// (colourize_prefixes). With `status_line`, the ranks' unfinished lines
/// (progress bars) are shown in one status line at the bottom of `fd`,
/// redrawn in place ("\r", erase line) and cut to the terminal's width;
/// finished lines and notices are written above it. All three are for a
/// terminal.
class FdLineSink final : public LineSink {
 public:
  explicit FdLineSink(int fd, int notice_fd = -1, bool colour = false, bool notice_colour = false,
                      bool status_line = false) noexcept
      : fd_(fd),
        notice_fd_(notice_fd < 0 ? fd : notice_fd),
        colour_(colour),
        notice_colour_(notice_colour),
        status_line_(status_line && fd >= 0) {}
  void write(std::string_view lines) override;
  void notice(std::string_view lines) override;
  void progress(std::string_view label, std::string_view text) override;
  bool wants_progress() const noexcept override { return status_line_; }
  bool wants_lines() const noexcept override { return fd_ >= 0; }
  bool broken() const noexcept { return broken_; }

 private:
  static void write_all(int fd, std::string_view data, bool& broken);
  int fd_;
  int notice_fd_;
  void clear_status();
  void draw_status();
  bool colour_;
  bool notice_colour_;
  bool status_line_;
  bool status_shown_ = false;
  std::vector<std::pair<std::string, std::string>> progress_;  // label -> unfinished line
  bool broken_ = false;
  bool notice_broken_ = false;
};

/// Discards everything (log files only, and tests).
class NullLineSink final : public LineSink {
 public:
  void write(std::string_view) override {}
  bool wants_lines() const noexcept override { return false; }
};

/// Keeps a slow console from ever slowing the ranks: blocks of lines are
/// queued (at most `capacity_bytes`) and written to `target` by a thread of
/// its own. When the queue is full, the oldest queued lines of the rank with
/// the most queued are dropped to make room, so every rank's newest lines
/// (its last words) get through; the dropped lines are counted, and a notice
/// saying how many is written when the console has caught up or, during a
/// long flood, once a second. Notices are never dropped. The destructor writes out what is queued, then joins the
/// thread (it waits for a console that is not being read, as any program
/// writing to it would).
class NonBlockingSink final : public LineSink {
 public:
  /// Default queue bound: 4 MiB.
  static constexpr std::size_t default_capacity_bytes = 4 << 20;

  explicit NonBlockingSink(LineSink& target, std::size_t capacity_bytes = default_capacity_bytes);
  NonBlockingSink(const NonBlockingSink&) = delete;
  NonBlockingSink& operator=(const NonBlockingSink&) = delete;
  ~NonBlockingSink() override;

  void write(std::string_view lines) override;
  void notice(std::string_view lines) override;
  /// Queued in order with the lines; a progress update is dropped (not
  /// counted) when the queue is full, an exit never.
  void progress(std::string_view label, std::string_view text) override;
  void rank_exited(std::size_t index, ExitStatus status, bool stopped_by_launcher) override;
  bool wants_lines() const noexcept override { return target_.wants_lines(); }
  bool wants_progress() const noexcept override { return target_.wants_progress(); }
  /// Lines skipped so far because the target fell behind.
  std::uint64_t skipped_lines() const;
  /// Bytes of lines and progress queued or being written right now (notices not counted).
  std::size_t queued_bytes() const;

 private:
  enum class Kind { lines, notice, progress, exit };
  struct Block {
    Kind kind;
    std::string text;
    std::string label;       // progress
    std::size_t index = 0;   // exit
    ExitStatus status{};     // exit
    bool stopped = false;    // exit
  };
  void push(std::string_view text, Kind kind);
  bool drop_oldest_of_busiest();
  void queue_skip_notice();
  void run();

  LineSink& target_;
  const std::size_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Block> queue_;
  std::size_t queued_bytes_ = 0;
  std::uint64_t skipped_since_notice_ = 0;
  std::chrono::steady_clock::time_point last_notice_{};
  std::vector<std::pair<std::string, std::size_t>> label_bytes_;  // queued line bytes per rank label
  std::uint64_t skipped_total_ = 0;
  bool closing_ = false;
  std::thread writer_;
};

}  // namespace davincirun
