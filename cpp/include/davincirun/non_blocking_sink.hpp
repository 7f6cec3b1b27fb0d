// A console that never slows the ranks: a queue in front of a slow sink.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <thread>

#include "davincirun/console_sink.hpp"
#include "davincirun/output_queue.hpp"

namespace davincirun {

/// Keeps a slow console from ever slowing the ranks: every call is queued
/// (an OutputQueue of at most `capacity_bytes` bytes of lines) and passed to
/// `target`, in order, by a thread of its own. Lines dropped because the
/// target fell behind are counted, and a notice saying how many is written
/// when the target has caught up or, during a long flood, once a second.
/// The destructor writes out what is queued, then joins the thread (it
/// waits for a console that is not being read, as any program writing to
/// it would).
class NonBlockingSink final : public LineSink {
 public:
  /// Default queue bound: 4 MiB.
  static constexpr std::size_t default_capacity_bytes = 4 << 20;

  explicit NonBlockingSink(LineSink& target, std::size_t capacity_bytes = default_capacity_bytes);
  NonBlockingSink(const NonBlockingSink&) = delete;
  NonBlockingSink& operator=(const NonBlockingSink&) = delete;
  ~NonBlockingSink() override;

  void write(std::size_t index, std::string_view lines) override;
  void notice(std::string_view lines) override;
  void progress(std::size_t index, std::string_view text) override;
  void rank_exited(std::size_t index, ExitStatus status, bool stopped_by_launcher) override;
  void attempt_started(int attempt, const std::vector<pid_t>& pids) override;
  void ranks_status(const std::vector<RankStatus>& statuses) override;
  bool wants_lines() const noexcept override { return target_.wants_lines(); }
  bool wants_progress() const noexcept override { return target_.wants_progress(); }
  /// Lines dropped so far because the target fell behind.
  std::uint64_t skipped_lines() const;

 private:
  void count_dropped();
  void queue_skip_notice();
  void run();

  LineSink& target_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  OutputQueue queue_;
  std::uint64_t skipped_since_notice_ = 0;
  std::uint64_t skipped_total_ = 0;
  std::chrono::steady_clock::time_point last_notice_{};
  bool closing_ = false;
  std::thread writer_;  // last: starts once the members above exist
};

}  // namespace davincirun
