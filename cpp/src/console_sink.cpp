#include "davincirun/console_sink.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

namespace davincirun {

void FdLineSink::write(std::string_view lines) {
  if (fd_ >= 0) write_all(fd_, lines, broken_);
}

void FdLineSink::notice(std::string_view lines) {
  if (notice_fd_ >= 0) write_all(notice_fd_, lines, notice_fd_ == fd_ ? broken_ : notice_broken_);
}

void FdLineSink::write_all(int fd, std::string_view data, bool& broken) {
  while (!broken && !data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        // A non-blocking terminal or pipe: wait for room rather than drop.
        pollfd room{fd, POLLOUT, 0};
        ::poll(&room, 1, -1);
        continue;
      }
      broken = true;  // EPIPE, EBADF...: stop writing to this stream
      return;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

NonBlockingSink::NonBlockingSink(LineSink& target, std::size_t capacity_bytes)
    : target_(target), capacity_(capacity_bytes), writer_([this] { run(); }) {}

NonBlockingSink::~NonBlockingSink() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
  }
  wake_.notify_all();
  writer_.join();
}

void NonBlockingSink::write(std::string_view lines) { push(lines, Kind::lines); }
void NonBlockingSink::notice(std::string_view lines) { push(lines, Kind::notice); }

void NonBlockingSink::progress(std::string_view label, std::string_view text) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Only the latest state of a progress line matters: when the console is
    // behind, this one is simply not shown.
    if (queued_bytes_ + text.size() > capacity_) return;
    queued_bytes_ += text.size();
    queue_.push_back(Block{Kind::progress, std::string(text), std::string(label)});
  }
  wake_.notify_one();
}

void NonBlockingSink::rank_exited(std::size_t index, ExitStatus status, bool stopped_by_launcher) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(Block{Kind::exit, {}, {}, index, status, stopped_by_launcher});
  }
  wake_.notify_one();
}

std::uint64_t NonBlockingSink::skipped_lines() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return skipped_total_;
}

std::size_t NonBlockingSink::queued_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queued_bytes_;
}

void NonBlockingSink::push(std::string_view text, Kind kind) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool is_notice = kind == Kind::notice;
    if (!is_notice && queued_bytes_ + text.size() > capacity_) {
      const auto lines = static_cast<std::uint64_t>(std::count(text.begin(), text.end(), '\n'));
      skipped_since_notice_ += lines;
      skipped_total_ += lines;
      return;
    }
    if (skipped_since_notice_ > 0 && !is_notice) {
      // Room again: say what the console missed before what comes next.
      std::string note = fmt::format("[davincirun] {} line(s) not shown here (the console fell behind); "
                                     "the log files have them\n",
                                     skipped_since_notice_);
      queued_bytes_ += note.size();
      queue_.push_back(Block{Kind::notice, std::move(note), {}});
      skipped_since_notice_ = 0;
    }
    queued_bytes_ += text.size();
    queue_.push_back(Block{kind, std::string(text), {}});
  }
  wake_.notify_one();
}

void NonBlockingSink::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return closing_ || !queue_.empty(); });
    if (queue_.empty()) return;  // closing, and everything is written
    Block block = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    switch (block.kind) {
      case Kind::lines: target_.write(block.text); break;
      case Kind::notice: target_.notice(block.text); break;
      case Kind::progress: target_.progress(block.label, block.text); break;
      case Kind::exit: target_.rank_exited(block.index, block.status, block.stopped); break;
    }
    lock.lock();
    queued_bytes_ -= block.text.size();
  }
}

}  // namespace davincirun
