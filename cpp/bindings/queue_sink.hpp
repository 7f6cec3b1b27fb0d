// A console sink that hands the ranks' lines, progress lines and exits from
// the event-loop thread to the Python thread waiting on the job, which shows
// them itself (so output lands where Python's own output goes: the terminal,
// a captured stream or the notebook cell that made the call).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "davincirun/console_sink.hpp"
#include "davincirun/log_streamer.hpp"

namespace davincirun::python {

class QueueSink final : public LineSink {
 public:
  /// Bytes of rank lines held for Python at most (8 MiB), whatever the budget.
  static constexpr std::size_t capacity_bytes = 8 << 20;

  struct RankExit {
    std::size_t index;
    ExitStatus status;
    bool stopped_by_launcher;
  };
  /// What arrived since the last take().
  struct Batch {
    std::string lines;               ///< whole lines, prefixed, in order; notices included
    std::uint64_t skipped_lines = 0; ///< lines dropped (oldest first) to stay within the hold
    std::vector<std::pair<std::string, std::string>> progress;  ///< (label, latest text); "" = finished
    /// (label, its latest whole line), shown or dropped: what each rank said last
    std::vector<std::pair<std::string, std::string>> last_lines;
    std::vector<RankExit> exits;
  };

  /// Bytes of rank lines take() returns at most (default and at most
  /// capacity_bytes): a display that takes every `T` seconds then shows at
  /// most budget / T bytes per second. Lines wait here, in order, for a
  /// later take(), up to the budget + one longest line; beyond that the
  /// oldest waiting lines of the rank with the most waiting are dropped
  /// and counted, whole, so the newest output of every rank (its last
  /// words, a traceback) is what gets shown. Notices are never dropped. A line longer than the budget is taken alone, so
  /// every line can be shown. The log files keep everything.
  void set_budget(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    budget_ = std::max<std::size_t>(1, std::min(bytes, capacity_bytes));
    hold_ = std::min(capacity_bytes, budget_ + RankLog::max_line_bytes + 64);
    drop_oldest();
  }

  void write(std::string_view lines) override {
    if (lines.empty()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      note_last_line(lines);
      blocks_.push_back(Block{std::string(lines), 0, false, std::string(line_label(lines))});
      line_bytes_ += lines.size();
      add_waiting(blocks_.back().label, lines.size());
      drop_oldest();
    }
    ready_.notify_all();
  }

  void notice(std::string_view lines) override {
    if (lines.empty()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      blocks_.push_back(Block{std::string(lines), 0, true, {}});
    }
    ready_.notify_all();
  }

  void progress(std::string_view label, std::string_view text) override {
    std::lock_guard<std::mutex> lock(mutex_);
    set(progress_, label, text);
  }

  bool wants_progress() const noexcept override { return true; }

  void rank_exited(std::size_t index, ExitStatus status, bool stopped_by_launcher) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      exits_.push_back(RankExit{index, status, stopped_by_launcher});
    }
    ready_.notify_all();
  }

  /// What arrived since the last call: rank lines up to the budget (at
  /// least one whole line) with the notices among them, or every line when
  /// `everything` (the job is over); no lines (they stay queued) unless `lines`.
  Batch take(bool everything, bool lines = true) {
    std::lock_guard<std::mutex> lock(mutex_);
    Batch batch;
    batch.progress.swap(progress_);
    batch.last_lines.swap(last_lines_);
    batch.exits.swap(exits_);
    if (!lines) return batch;
    std::size_t taken = 0;  // rank-line bytes
    while (!blocks_.empty()) {
      Block& b = blocks_.front();
      const std::string_view rest = std::string_view(b.text).substr(b.offset);
      if (b.notice || everything || taken + rest.size() <= budget_) {
        batch.lines.append(rest);
        if (!b.notice) {
          taken += rest.size();
          release(b, rest.size());
        }
        blocks_.pop_front();
        continue;
      }
      // Part of this block: whole lines up to the budget, or one line to start with.
      const std::size_t room = taken < budget_ ? budget_ - taken : 0;
      std::size_t cut = room == 0 ? std::string_view::npos : rest.rfind('\n', room - 1);
      if (cut == std::string_view::npos) {
        if (taken > 0) break;
        cut = rest.find('\n');
      }
      batch.lines.append(rest.substr(0, cut + 1));
      release(b, cut + 1);
      b.offset += cut + 1;
      break;
    }
    batch.skipped_lines = std::exchange(skipped_lines_, 0);
    return batch;
  }

  /// Wakes the waiter (e.g. the job ended).
  void wake() {
    { std::lock_guard<std::mutex> lock(mutex_); woken_ = true; }
    ready_.notify_all();
  }

  /// Waits up to `timeout` for a wake() or, when `on_output`, for lines or
  /// exits; true if one came.
  bool wait(std::chrono::milliseconds timeout, bool on_output) {
    std::unique_lock<std::mutex> lock(mutex_);
    bool ready = ready_.wait_for(lock, timeout, [&] {
      return woken_ || (on_output && (!blocks_.empty() || skipped_lines_ > 0 || !exits_.empty()));
    });
    woken_ = false;
    return ready;
  }

 private:
  struct Block {
    std::string text;        // whole lines (one write() or notice() call)
    std::size_t offset = 0;  // bytes already taken or dropped
    bool notice = false;
    std::string label;       // the rank whose lines these are ("rank 3")
  };
  using Latest = std::vector<std::pair<std::string, std::string>>;

  static void set(Latest& latest, std::string_view label, std::string_view text) {
    for (auto& entry : latest) {
      if (entry.first == label) {
        entry.second.assign(text);
        return;
      }
    }
    latest.emplace_back(std::string(label), std::string(text));
  }

  void add_waiting(const std::string& label, std::size_t bytes) {
    auto it = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& w) { return w.first == label; });
    if (it == waiting_.end()) {
      waiting_.emplace_back(label, bytes);
    } else {
      it->second += bytes;
    }
  }

  // `bytes` of block `b`'s lines no longer wait (taken or dropped).
  void release(const Block& b, std::size_t bytes) {
    line_bytes_ -= bytes;
    auto it = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& w) { return w.first == b.label; });
    if (it != waiting_.end() && (it->second -= bytes) == 0) waiting_.erase(it);
  }

  // Drops rank lines, whole, until at most hold_ bytes wait: always the
  // oldest lines of the rank with the most bytes waiting, so a rank that
  // stopped writing keeps its last lines while others flood.
  void drop_oldest() {
    while (line_bytes_ > hold_) {
      const auto most = std::max_element(waiting_.begin(), waiting_.end(),
                                         [](const auto& a, const auto& b) { return a.second < b.second; });
      const std::string label = most->first;
      auto it = std::find_if(blocks_.begin(), blocks_.end(), [&](const Block& b) { return !b.notice && b.label == label; });
      const std::string_view rest = std::string_view(it->text).substr(it->offset);
      const std::size_t excess = line_bytes_ - hold_;
      if (rest.size() <= excess) {
        skipped_lines_ += static_cast<std::uint64_t>(std::count(rest.begin(), rest.end(), '\n'));
        release(*it, rest.size());
        blocks_.erase(it);
        continue;
      }
      const std::size_t cut = rest.find('\n', excess - 1) + 1;  // the block ends in '\n'
      skipped_lines_ += static_cast<std::uint64_t>(std::count(rest.begin(), rest.begin() + cut, '\n'));
      release(*it, cut);
      it->offset += cut;
    }
  }

  // Each write() holds the lines of one read of one rank ("[<label>] text\n"
  // or "[<label>]+ text\n"): its last line is what that rank said last.
  void note_last_line(std::string_view lines) {
    if (lines.size() < 2 || lines.front() != '[') return;
    const std::size_t nl = lines.rfind('\n', lines.size() - 2);
    std::string_view line = lines.substr(nl == std::string_view::npos ? 0 : nl + 1);
    line.remove_suffix(1);  // its '\n'
    const std::string_view label = line_label(line);
    if (label.empty()) return;
    std::string_view text = line.substr(label.size() + 2);  // after "[<label>]"
    if (!text.empty() && text.front() == '+') text.remove_prefix(1);
    if (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    set(last_lines_, label, text.substr(0, RankLog::max_progress_bytes));
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Block> blocks_;
  std::size_t line_bytes_ = 0;  // rank-line bytes waiting in blocks_ (notices excluded)
  std::vector<std::pair<std::string, std::size_t>> waiting_;  // the same, per label
  std::size_t budget_ = capacity_bytes;
  std::size_t hold_ = capacity_bytes;
  std::uint64_t skipped_lines_ = 0;
  Latest progress_;
  Latest last_lines_;
  std::vector<RankExit> exits_;
  bool woken_ = false;
};

}  // namespace davincirun::python
