// The backlog of a console that may fall behind the ranks, and the one rule
// for what it drops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "davincirun/enum_names.hpp"
#include "davincirun/job_types.hpp"
#include "davincirun/rank_progress.hpp"

namespace davincirun {

/// Console output waiting to be shown, in arrival order: blocks of one
/// rank's whole lines, notices, progress updates and rank exits (the calls
/// of a LineSink). Bounded in bytes of rank lines: when more than the
/// capacity wait, the oldest lines of the rank with the most bytes waiting
/// are dropped, whole, and counted, down to what the next busiest rank
/// holds, so that the ranks' shares even out and every rank keeps its
/// newest lines (its last words, a traceback), also when one large block of
/// a rank lands on a full queue or another rank floods. Notices and exits
/// are never dropped; a progress update that finds no room is refused (only
/// a bar's latest state matters). Not thread-safe: its owner locks.
class OutputQueue {
 public:
  enum class Kind { lines, notice, progress, exit, attempt, status };
  struct Entry {
    Kind kind = Kind::lines;
    std::size_t index = 0;             ///< lines, progress, exit: the rank's index
    std::string text;                  ///< lines, notice, progress
    ExitStatus status{};               ///< exit
    bool stopped_by_launcher = false;  ///< exit
    std::vector<pid_t> pids;           ///< attempt (its number in `index`)
    std::vector<RankStatus> statuses;  ///< status
  };

  /// `capacity_bytes`: bytes of rank lines (and progress text) held at most.
  explicit OutputQueue(std::size_t capacity_bytes) : capacity_(capacity_bytes) {}

  /// Changes the bound, dropping lines at once if more wait.
  void set_capacity(std::size_t bytes);
  std::size_t capacity() const noexcept { return capacity_; }

  /// Queues one or more whole lines of rank `index`, then drops lines (the
  /// new ones included, if need be) until the bound holds.
  void push_lines(std::size_t index, std::string_view lines);
  void push_notice(std::string_view lines);
  /// false (and nothing queued) when the text does not fit within the bound.
  bool push_progress(std::size_t index, std::string_view text);
  void push_exit(std::size_t index, ExitStatus status, bool stopped_by_launcher);
  void push_attempt(int attempt, const std::vector<pid_t>& pids);
  /// Never dropped: at most one a second, a few bytes a rank.
  void push_status(const std::vector<RankStatus>& statuses);

  bool empty() const noexcept { return entries_.empty(); }
  /// Removes and returns the front entry (of lines, what is left of it).
  /// The queue must not be empty.
  Entry pop();
  /// Removes and returns, in order, the notices and rank lines at the front:
  /// rank lines up to `budget` bytes, whole lines only, but at least one
  /// line when the first entry is a rank's (a line longer than the budget
  /// comes alone). Stops at a progress, exit or attempt entry.
  std::string take_lines(std::size_t budget);

  /// Bytes of rank lines waiting.
  std::size_t line_bytes() const noexcept { return line_bytes_; }
  /// Lines dropped since the last call.
  std::uint64_t take_dropped() noexcept;

 private:
  struct Queued : Entry {
    std::size_t offset = 0;  // bytes of `text` already taken or dropped (lines only)
  };
  void release(Queued& entry, std::size_t bytes);
  void drop_to_capacity();

  std::size_t capacity_;
  std::deque<Queued> entries_;
  std::size_t line_bytes_ = 0;
  std::size_t progress_bytes_ = 0;
  std::vector<std::size_t> waiting_;  // bytes of lines waiting, by rank index
  std::uint64_t dropped_ = 0;
};

/// to_string(): "lines", "notice", "progress", "exit", "attempt" or "status".
DAVINCIRUN_ENUM_NAMES(OutputQueue::Kind, "lines", "notice", "progress", "exit", "attempt", "status");

}  // namespace davincirun
