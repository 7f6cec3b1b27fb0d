// A console whose reader comes for the output at its own pace, such as the
// Python thread that shows a job in a notebook cell.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "davincirun/console_sink.hpp"
#include "davincirun/output_queue.hpp"

namespace davincirun {

/// Holds what a job's console receives until a reader take()s it: rank lines
/// (paced by a byte budget per take), notices, each rank's latest progress
/// text and last whole line, and rank exits. Thread-safe: the job's thread
/// writes, the reader's thread waits and takes.
class PolledSink final : public LineSink {
 public:
  /// Bytes of rank lines held at most (8 MiB), whatever the budget.
  static constexpr std::size_t capacity_bytes = 8 << 20;

  struct RankExit {
    std::size_t index;
    ExitStatus status;
    bool stopped_by_launcher;
    int attempt;  ///< of a job that restarts: the attempt the rank ran in (1, 2, ...)
  };
  /// A job that restarts started attempt `attempt`, its ranks' pids by index.
  struct Attempt {
    int attempt;
    std::vector<pid_t> pids;
  };
  /// What arrived since the last take().
  struct Batch {
    std::string lines;                ///< whole lines, prefixed, in order; notices included
    std::uint64_t skipped_lines = 0;  ///< lines dropped (oldest first) to stay within the hold
    /// (rank index, latest unfinished line); "" = the line was finished
    std::vector<std::pair<std::size_t, std::string>> progress;
    /// (rank index, its latest whole line, without its prefix), shown or dropped: what each rank said last
    std::vector<std::pair<std::size_t, std::string>> last_lines;
    std::vector<RankExit> exits;
    std::vector<Attempt> attempts;  ///< in order: exits of an attempt follow its start
  };

  PolledSink() : queue_(capacity_bytes) {}

  /// Bytes of rank lines take() returns at most (default and at most
  /// capacity_bytes): a reader that takes every `T` seconds then shows at
  /// most budget / T bytes per second. Lines wait, in order, for a later
  /// take(), up to the budget + one longest line (RankLog::max_line_bytes);
  /// beyond that the OutputQueue drops the oldest waiting lines of the rank
  /// with the most waiting, whole, and counts them. A line longer than the
  /// budget is taken alone, so every line can be shown.
  void set_budget(std::size_t bytes);

  void write(std::size_t index, std::string_view lines) override;
  void notice(std::string_view lines) override;
  void progress(std::size_t index, std::string_view text) override;
  bool wants_progress() const noexcept override { return true; }
  void rank_exited(std::size_t index, ExitStatus status, bool stopped_by_launcher) override;
  void attempt_started(int attempt, const std::vector<pid_t>& pids) override;
  void ranks_status(const std::vector<RankStatus>& statuses) override;

  /// Each rank's latest RankStatus that arrived since the last call, by index.
  std::vector<RankStatus> take_status();

  /// What arrived since the last call: rank lines up to the budget (at
  /// least one whole line) with the notices among them, or every line when
  /// `everything` (the job is over); no lines (they stay queued) unless `lines`.
  Batch take(bool everything, bool lines = true);

  /// Wakes the waiter (e.g. the job ended).
  void wake();
  /// Waits up to `timeout` for a wake() or, when `on_output`, for lines or
  /// exits; true if one came.
  bool wait(std::chrono::milliseconds timeout, bool on_output);

 private:
  using Latest = std::vector<std::pair<std::size_t, std::string>>;
  static void set(Latest& latest, std::size_t index, std::string_view text);
  void note_last_line(std::size_t index, std::string_view lines);

  std::mutex mutex_;
  std::condition_variable ready_;
  OutputQueue queue_;  // rank lines and notices only
  std::size_t budget_ = capacity_bytes;
  std::uint64_t skipped_lines_ = 0;
  Latest progress_;
  Latest last_lines_;
  std::vector<RankExit> exits_;
  std::vector<Attempt> attempts_;
  std::vector<RankStatus> statuses_;  // the latest of each rank, in arrival order
  int attempt_ = 1;
  bool woken_ = false;
};

}  // namespace davincirun
