#include "davincirun/non_blocking_sink.hpp"

#include <fmt/format.h>

namespace davincirun {

namespace {
// During a long flood, "lines not shown" comes at most this often.
constexpr auto notice_interval = std::chrono::seconds(1);
}  // namespace

NonBlockingSink::NonBlockingSink(LineSink& target, std::size_t capacity_bytes)
    : target_(target), queue_(capacity_bytes), writer_([this] { run(); }) {}

NonBlockingSink::~NonBlockingSink() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
  }
  wake_.notify_all();
  writer_.join();
}

void NonBlockingSink::write(std::size_t index, std::string_view lines) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Say what was missed before what comes next.
    if (skipped_since_notice_ > 0 && std::chrono::steady_clock::now() - last_notice_ >= notice_interval) {
      queue_skip_notice();
    }
    queue_.push_lines(index, lines);
    count_dropped();
  }
  wake_.notify_one();
}

void NonBlockingSink::notice(std::string_view lines) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_notice(lines);
  }
  wake_.notify_one();
}

void NonBlockingSink::progress(std::size_t index, std::string_view text) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Refused when the console is behind: a later state will come.
    if (!queue_.push_progress(index, text)) return;
  }
  wake_.notify_one();
}

void NonBlockingSink::rank_exited(std::size_t index, ExitStatus status, bool stopped_by_launcher) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_exit(index, status, stopped_by_launcher);
  }
  wake_.notify_one();
}

void NonBlockingSink::attempt_started(int attempt, const std::vector<pid_t>& pids) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_attempt(attempt, pids);
  }
  wake_.notify_one();
}

void NonBlockingSink::ranks_status(const std::vector<RankStatus>& statuses) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_status(statuses);
  }
  wake_.notify_one();
}

std::uint64_t NonBlockingSink::skipped_lines() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return skipped_total_;
}

void NonBlockingSink::count_dropped() {
  const std::uint64_t dropped = queue_.take_dropped();
  skipped_since_notice_ += dropped;
  skipped_total_ += dropped;
}

void NonBlockingSink::queue_skip_notice() {
  queue_.push_notice(notice_line(fmt::format(
      "{} line(s) not shown here (the console fell behind); the log files have them", skipped_since_notice_)));
  skipped_since_notice_ = 0;
  last_notice_ = std::chrono::steady_clock::now();
}

void NonBlockingSink::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    const auto ready = [this] { return closing_ || !queue_.empty(); };
    if (skipped_since_notice_ > 0) {
      wake_.wait_until(lock, last_notice_ + notice_interval, ready);
    } else {
      wake_.wait(lock, ready);
    }
    if (queue_.empty()) {
      // Caught up (or closing) with lines missed: say so now, at most once a second.
      if (skipped_since_notice_ > 0 &&
          (closing_ || std::chrono::steady_clock::now() - last_notice_ >= notice_interval)) {
        queue_skip_notice();
        continue;
      }
      if (closing_) return;  // everything is written
      continue;
    }
    OutputQueue::Entry entry = queue_.pop();
    lock.unlock();
    switch (entry.kind) {
      case OutputQueue::Kind::lines: target_.write(entry.index, entry.text); break;
      case OutputQueue::Kind::notice: target_.notice(entry.text); break;
      case OutputQueue::Kind::progress: target_.progress(entry.index, entry.text); break;
      case OutputQueue::Kind::exit: target_.rank_exited(entry.index, entry.status, entry.stopped_by_launcher); break;
      case OutputQueue::Kind::attempt: target_.attempt_started(static_cast<int>(entry.index), entry.pids); break;
      case OutputQueue::Kind::status: target_.ranks_status(entry.statuses); break;
    }
    lock.lock();
  }
}

}  // namespace davincirun
