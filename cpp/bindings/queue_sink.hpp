// A console sink that hands lines from the event-loop thread to the Python
// thread waiting on the job, which writes them to sys.stdout (so output lands
// where Python's own output goes: the terminal, a captured stream or the
// notebook cell that made the call).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "davincirun/log_streamer.hpp"

namespace davincirun::python {

class QueueSink final : public LineSink {
 public:
  /// Bytes held for Python at most (8 MiB). When Python falls behind, newer
  /// lines are skipped and counted; the log files never skip anything.
  static constexpr std::size_t capacity_bytes = 8 << 20;

  void write(std::string_view lines) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (pending_.size() + lines.size() > capacity_bytes) {
        skipped_lines_ += static_cast<std::uint64_t>(std::count(lines.begin(), lines.end(), '\n'));
      } else {
        pending_.append(lines);
      }
    }
    ready_.notify_all();
  }

  /// Everything queued so far, and the number of lines skipped since the last call.
  std::string take(std::uint64_t& skipped_lines) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string out;
    out.swap(pending_);
    skipped_lines = skipped_lines_;
    skipped_lines_ = 0;
    return out;
  }

  /// Wakes the waiter without output (e.g. the job ended).
  void wake() {
    { std::lock_guard<std::mutex> lock(mutex_); woken_ = true; }
    ready_.notify_all();
  }

  /// Waits up to `timeout` for output or a wake(); true if there is output or a wake.
  bool wait(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    bool ready = ready_.wait_for(lock, timeout, [this] { return !pending_.empty() || skipped_lines_ > 0 || woken_; });
    woken_ = false;
    return ready;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::string pending_;
  std::uint64_t skipped_lines_ = 0;
  bool woken_ = false;
};

}  // namespace davincirun::python
