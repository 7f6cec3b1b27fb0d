// Console sinks: where the ranks' live lines and the launcher's notices go,
// and how a console line looks ("[rank 3] text", "[davincirun] notice").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "davincirun/job_types.hpp"
#include "davincirun/rank_progress.hpp"

namespace davincirun {

/// Where console output goes. A rank is named by its index: its position in
/// the job (LaunchPlan::ranks, Supervisor's launches), not its rank id.
/// Calls come from one thread at a time (the event loop's, or a queue's
/// writer); write() and notice() receive one or more complete lines, each
/// ending in '\n'.
class LineSink {
 public:
  virtual ~LineSink() = default;
  /// Lines of rank `index`, each prefixed by its label ("[rank 3] ").
  virtual void write(std::size_t index, std::string_view lines) = 0;
  /// The launcher's own messages, each line starting with notice_prefix.
  virtual void notice(std::string_view lines) = 0;
  /// false when write() discards everything: the streamer then skips
  /// splitting the output into prefixed lines at all.
  virtual bool wants_lines() const noexcept { return true; }
  /// What rank `index`'s current, unfinished line shows now: a line it keeps
  /// redrawing with '\r' (a progress bar such as tqdm's), or text still
  /// waiting for its '\n'; at most RankLog::max_progress_bytes, without
  /// '\n'. An empty `text` means the line was finished (its final state came
  /// through write()) or the rank's output ended. Called at most once per
  /// read of the rank's output, and only when the text changed. Default:
  /// ignored (a console that shows finished lines only).
  virtual void progress(std::size_t /*index*/, std::string_view /*text*/) {}
  /// true when progress() is used; false (default) spares the streamer the work.
  virtual bool wants_progress() const noexcept { return false; }
  /// The bytes rank `index` wrote, in order, as the streamer took them:
  /// any split (a line may span calls), '\r' and all, before the same
  /// read's write() and progress(). For a watch of the output that needs no
  /// prefixed lines. Default: ignored.
  virtual void output(std::size_t /*index*/, std::string_view /*bytes*/) {}
  /// `bytes` bytes rank `index` wrote that output() is not given: with no
  /// lines and no progress wanted, the streamer moves the output to the log
  /// with splice(2) and reads back only the end of each move
  /// (RankLog::spliced_output_window). The next output() continues after
  /// them, possibly in the middle of a line. Default: ignored.
  virtual void output_skipped(std::size_t /*index*/, std::size_t /*bytes*/) {}
  /// true when output() is used; false (default) spares the streamer the work.
  virtual bool wants_output() const noexcept { return false; }
  /// Rank `index` has exited with `status`; `stopped_by_launcher`: it had
  /// been sent SIGTERM by the launcher first. Called after the rank's last
  /// lines. Default: ignored.
  virtual void rank_exited(std::size_t /*index*/, ExitStatus /*status*/, bool /*stopped_by_launcher*/) {}
  /// A job that restarts (SupervisorOptions::max_restarts) started attempt
  /// `attempt` (2, 3, ...): every rank runs again, with the process ids
  /// `pids` (by index); what comes after is this attempt's. Called after
  /// the previous attempt's last lines and exits. Default: ignored.
  virtual void attempt_started(int /*attempt*/, const std::vector<pid_t>& /*pids*/) {}
  /// What changed in the ranks' progress, output rates and slowness
  /// (rank_progress.hpp), at most once a second, from the supervisor
  /// process's watch of the output. Default: ignored.
  virtual void ranks_status(const std::vector<RankStatus>& /*statuses*/) {}
};

/// "rank 3": the label of rank id 3, in its console prefix "[rank 3] ".
std::string rank_label(int rank);

/// The console label of MindSpore's scheduler, in its prefix "[sched] ".
inline constexpr std::string_view scheduler_label = "sched";

/// rank_label(process.rank), or scheduler_label for the scheduler.
std::string process_label(const RankAssignment& process);

/// The prefix of every notice line: "[davincirun] ".
inline constexpr std::string_view notice_prefix = "[davincirun] ";

/// One notice line: notice_prefix + `text` + '\n'.
std::string notice_line(std::string_view text);

/// The text of a console line after its "[<label>] " or "[<label>]+ "
/// prefix (a continuation of an overlong line); `line` itself when it has
/// no such prefix.
std::string_view line_text(std::string_view line) noexcept;

/// The ANSI colour (SGR parameter) of rank id `rank`'s prefix: a cycle of six
/// that avoids red, green and yellow, which mean failure, success and warning.
const char* rank_colour(int rank) noexcept;

/// `lines` with each "[rank N]" (or "[rank N]+") prefix in its rank's colour,
/// "[sched]" (MindSpore's scheduler) in yellow,
/// and each notice_prefix in bold, as ANSI escape sequences.
std::string colourize_prefixes(std::string_view lines);

/// How an FdLineSink dresses its output; every flag is for a terminal.
struct ConsoleStyle {
  bool colour = false;         ///< rank prefixes of lines in colour (colourize_prefixes)
  bool notice_colour = false;  ///< notice prefixes in bold
  /// The ranks' unfinished lines (progress bars) in one status line at the
  /// bottom, redrawn in place ("\r", erase line) and cut to the terminal's
  /// width in display columns (display_width.hpp); finished lines and
  /// notices are written above it.
  bool status_line = false;
};

/// The status line: the ranks' live status (LineSink::ranks_status()) around
/// `bars` (the ranks' unfinished lines, "[rank 0] 45%|####  |"), most urgent
/// first: "slow: rank 2, rank 5 | <bars> | output 4.8 KB/s"; without bars,
/// the progress of the lowest-index rank that reports any ("[rank 0] epoch
/// 1 step 12") in their place. `labels`: each rank's label by index. "" when
/// there is nothing to say.
std::string status_summary(const std::vector<RankStatus>& statuses, const std::vector<std::string>& labels,
                           const std::string& bars);

/// Writes the ranks' lines to `fd` (e.g. 1, the terminal; -1 = nowhere) and
/// notices to `notice_fd` (e.g. 2; -1 = `fd` too). A closed reader (EPIPE)
/// silences that stream; the ranks and their log files carry on. `labels`:
/// each rank's label by index ("rank 3"), which names its entry in the
/// status line.
class FdLineSink final : public LineSink {
 public:
  explicit FdLineSink(int fd, int notice_fd = -1, ConsoleStyle style = {}, std::vector<std::string> labels = {})
      : fd_(fd), notice_fd_(notice_fd < 0 ? fd : notice_fd), style_(style), labels_(std::move(labels)) {
    style_.status_line = style_.status_line && fd >= 0;
  }
  void write(std::size_t index, std::string_view lines) override;
  void notice(std::string_view lines) override;
  void progress(std::size_t index, std::string_view text) override;
  bool wants_progress() const noexcept override { return style_.status_line; }
  /// Kept for the status line (status_summary()), redrawn with it.
  void ranks_status(const std::vector<RankStatus>& statuses) override;
  /// Its status leaves the status line, for the attempt: a job's last line is never a stale one.
  void rank_exited(std::size_t index, ExitStatus status, bool stopped_by_launcher) override;
  void attempt_started(int attempt, const std::vector<pid_t>& pids) override;
  bool wants_lines() const noexcept override { return fd_ >= 0; }
  bool broken() const noexcept { return broken_; }

 private:
  static void write_all(int fd, std::string_view data, bool& broken);
  void clear_status();
  void draw_status();

  int fd_;
  int notice_fd_;
  ConsoleStyle style_;
  std::vector<std::string> labels_;
  bool status_shown_ = false;
  std::vector<std::pair<std::size_t, std::string>> progress_;  // index -> unfinished line, in arrival order
  std::vector<RankStatus> statuses_;                           // of running ranks, by index
  std::vector<bool> exited_;                                   // by index, this attempt
  bool broken_ = false;
  bool notice_broken_ = false;
};

/// Discards everything (log files only, and tests).
class NullLineSink final : public LineSink {
 public:
  void write(std::size_t, std::string_view) override {}
  void notice(std::string_view) override {}
  bool wants_lines() const noexcept override { return false; }
};

}  // namespace davincirun
