// A console sink that hands the ranks' lines, progress lines and exits from
// the event-loop thread to the Python thread waiting on the job, which shows
// them itself (so output lands where Python's own output goes: the terminal,
// a captured stream or the notebook cell that made the call).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "davincirun/console_sink.hpp"

namespace davincirun::python {

class QueueSink final : public LineSink {
 public:
  /// Bytes of lines held for Python at most (8 MiB), whatever the budget.
  static constexpr std::size_t capacity_bytes = 8 << 20;

  struct RankExit {
    std::size_t index;
    ExitStatus status;
    bool stopped_by_launcher;
  };
  /// What arrived since the last take().
  struct Batch {
    std::string lines;               ///< whole lines, prefixed, in order; notices included
    std::uint64_t skipped_lines = 0; ///< lines over the budget, not in `lines`
    std::vector<std::pair<std::string, std::string>> progress;  ///< (label, latest text); "" = finished
    std::vector<RankExit> exits;
  };

  /// Bytes of rank lines kept between two take() calls (default and at most
  /// capacity_bytes): a display that takes every `T` seconds then shows at
  /// most budget / T bytes per second. Lines over it are skipped and
  /// counted, whole; notices are never skipped. The log files keep everything.
  void set_budget(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    budget_ = std::min(bytes, capacity_bytes);
  }

  void write(std::string_view lines) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const std::size_t room = line_bytes_ < budget_ ? budget_ - line_bytes_ : 0;
      std::size_t keep = lines.size();
      if (keep > room) {
        // Keep the lines that fit whole; count the others.
        const std::size_t nl = room == 0 ? std::string_view::npos : lines.rfind('\n', room - 1);
        keep = nl == std::string_view::npos ? 0 : nl + 1;
        skipped_lines_ += static_cast<std::uint64_t>(std::count(lines.begin() + keep, lines.end(), '\n'));
      }
      pending_.append(lines.substr(0, keep));
      line_bytes_ += keep;
    }
    ready_.notify_all();
  }

  void notice(std::string_view lines) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pending_.append(lines);
    }
    ready_.notify_all();
  }

  void progress(std::string_view label, std::string_view text) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& entry : progress_) {
      if (entry.first == label) {
        entry.second.assign(text);
        return;
      }
    }
    progress_.emplace_back(std::string(label), std::string(text));
  }

  void rank_exited(std::size_t index, ExitStatus status, bool stopped_by_launcher) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      exits_.push_back(RankExit{index, status, stopped_by_launcher});
    }
    ready_.notify_all();
  }

  /// Everything queued since the last call.
  Batch take() {
    std::lock_guard<std::mutex> lock(mutex_);
    Batch batch;
    batch.lines.swap(pending_);
    batch.skipped_lines = std::exchange(skipped_lines_, 0);
    batch.progress.swap(progress_);
    batch.exits.swap(exits_);
    line_bytes_ = 0;
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
      return woken_ || (on_output && (!pending_.empty() || skipped_lines_ > 0 || !exits_.empty()));
    });
    woken_ = false;
    return ready;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::string pending_;
  std::size_t line_bytes_ = 0;  // rank lines in pending_ (notices excluded)
  std::size_t budget_ = capacity_bytes;
  std::uint64_t skipped_lines_ = 0;
  std::vector<std::pair<std::string, std::string>> progress_;
  std::vector<RankExit> exits_;
  bool woken_ = false;
};

}  // namespace davincirun::python
