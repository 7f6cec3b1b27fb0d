#include "davincirun/console_sink.hpp"

#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

namespace davincirun {

std::string_view line_label(std::string_view lines) noexcept {
  const std::size_t close = lines.find(']');
  if (lines.empty() || lines.front() != '[' || close == std::string_view::npos) return {};
  return lines.substr(1, close - 1);
}

const char* rank_colour(int rank) noexcept {
  static const char* const colours[] = {"34", "35", "36", "94", "95", "96"};
  return colours[static_cast<unsigned>(rank) % 6];
}

std::string colourize_prefixes(std::string_view lines) {
  std::string out;
  out.reserve(lines.size() + lines.size() / 4);
  while (!lines.empty()) {
    const std::size_t nl = lines.find('\n');
    std::string_view line = lines.substr(0, nl == std::string_view::npos ? lines.size() : nl + 1);
    lines.remove_prefix(line.size());
    const std::size_t close = line.find(']');
    if (line.rfind("[rank ", 0) == 0 && close != std::string_view::npos) {
      const int rank = std::atoi(std::string(line.substr(6, close - 6)).c_str());
      const std::size_t end = close + 1 < line.size() && line[close + 1] == '+' ? close + 2 : close + 1;
      out += fmt::format("\x1b[{}m{}\x1b[0m", rank_colour(rank), line.substr(0, end));
      line.remove_prefix(end);
    } else if (line.rfind("[davincirun]", 0) == 0) {
      out += "\x1b[1m[davincirun]\x1b[0m";
      line.remove_prefix(12);
    }
    out += line;
  }
  return out;
}

void FdLineSink::write(std::string_view lines) {
  if (fd_ < 0) return;
  clear_status();
  if (colour_) {
    write_all(fd_, colourize_prefixes(lines), broken_);
  } else {
    write_all(fd_, lines, broken_);
  }
  draw_status();
}

void FdLineSink::progress(std::string_view label, std::string_view text) {
  if (!status_line_) return;
  auto it = std::find_if(progress_.begin(), progress_.end(), [&](const auto& p) { return p.first == label; });
  if (text.empty()) {
    if (it != progress_.end()) progress_.erase(it);
  } else if (it != progress_.end()) {
    it->second.assign(text);
  } else {
    progress_.emplace_back(std::string(label), std::string(text));
  }
  clear_status();
  draw_status();
}

void FdLineSink::clear_status() {
  if (!status_shown_) return;
  write_all(fd_, "\r\x1b[K", broken_);
  status_shown_ = false;
}

void FdLineSink::draw_status() {
  if (!status_line_ || progress_.empty() || broken_) return;
  winsize size{};
  const std::size_t width = ::ioctl(fd_, TIOCGWINSZ, &size) == 0 && size.ws_col > 1 ? size.ws_col - 1u : 79u;
  // "[rank 0] 45%|####  | [rank 1] 44%|### ", cut to the width in characters;
  // the ranks' own control characters are left out.
  std::string line;
  std::size_t columns = 0;
  for (const auto& [label, text] : progress_) {
    const std::string part = (line.empty() ? "[" : " | [") + label + "] " + text;
    for (std::size_t i = 0; i < part.size(); ++i) {
      const auto c = static_cast<unsigned char>(part[i]);
      if (c == 0x1b) {  // an escape sequence: CSI ("ESC [ ... final") or ESC + one byte
        if (i + 1 < part.size() && part[i + 1] == '[') {
          i += 2;
          while (i < part.size() && !(part[i] >= '@' && part[i] <= '~')) ++i;
        } else {
          ++i;
        }
        continue;
      }
      if (c < 0x20 || c == 0x7f) continue;
      const bool starts = (c & 0xC0) != 0x80;  // a character starts here
      if (starts && columns == width) break;
      if (starts) ++columns;
      line += part[i];
    }
    if (columns == width) break;
  }
  write_all(fd_, "\r" + line + "\x1b[K", broken_);
  status_shown_ = true;
}

void FdLineSink::notice(std::string_view lines) {
  if (notice_fd_ < 0) return;
  clear_status();
  bool& broken = notice_fd_ == fd_ ? broken_ : notice_broken_;
  if (notice_colour_) {
    write_all(notice_fd_, colourize_prefixes(lines), broken);
  } else {
    write_all(notice_fd_, lines, broken);
  }
  draw_status();
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

namespace {

void add_bytes(std::vector<std::pair<std::string, std::size_t>>& counts, std::string_view label, std::size_t add,
               std::size_t remove) {
  for (auto it = counts.begin(); it != counts.end(); ++it) {
    if (it->first == label) {
      it->second = it->second + add - remove;
      if (it->second == 0) counts.erase(it);
      return;
    }
  }
  if (add > remove) counts.emplace_back(std::string(label), add - remove);
}

constexpr auto notice_interval = std::chrono::seconds(1);

}  // namespace

void NonBlockingSink::push(std::string_view text, Kind kind) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool is_lines = kind == Kind::lines;
    if (is_lines) {
      while (queued_bytes_ + text.size() > capacity_ && drop_oldest_of_busiest()) {
      }
      if (queued_bytes_ + text.size() > capacity_) {
        // Nothing left to drop (what is queued is being written): skip these.
        const auto lines = static_cast<std::uint64_t>(std::count(text.begin(), text.end(), '\n'));
        skipped_since_notice_ += lines;
        skipped_total_ += lines;
        return;
      }
    }
    if (skipped_since_notice_ > 0 && std::chrono::steady_clock::now() - last_notice_ >= notice_interval) {
      queue_skip_notice();  // say what was missed before what comes next
    }
    if (kind != Kind::notice) queued_bytes_ += text.size();  // notices are small and never dropped
    queue_.push_back(Block{kind, std::string(text), {}});
    if (is_lines) {
      queue_.back().label.assign(line_label(text));  // one block holds one rank's lines
      add_bytes(label_bytes_, queue_.back().label, text.size(), 0);
    }
  }
  wake_.notify_one();
}

bool NonBlockingSink::drop_oldest_of_busiest() {
  if (label_bytes_.empty()) return false;
  const auto busiest = std::max_element(label_bytes_.begin(), label_bytes_.end(),
                                        [](const auto& a, const auto& b) { return a.second < b.second; });
  const std::string label = busiest->first;
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (it->kind != Kind::lines || it->label != label) continue;
    const auto lines = static_cast<std::uint64_t>(std::count(it->text.begin(), it->text.end(), '\n'));
    skipped_since_notice_ += lines;
    skipped_total_ += lines;
    queued_bytes_ -= it->text.size();
    add_bytes(label_bytes_, label, 0, it->text.size());
    queue_.erase(it);
    return true;
  }
  return false;
}

void NonBlockingSink::queue_skip_notice() {
  std::string note = fmt::format("[davincirun] {} line(s) not shown here (the console fell behind); "
                                 "the log files have them\n",
                                 skipped_since_notice_);
  skipped_since_notice_ = 0;
  last_notice_ = std::chrono::steady_clock::now();
  queue_.push_back(Block{Kind::notice, std::move(note), {}});
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
    Block block = std::move(queue_.front());
    queue_.pop_front();
    if (block.kind == Kind::lines) add_bytes(label_bytes_, block.label, 0, block.text.size());
    lock.unlock();
    switch (block.kind) {
      case Kind::lines: target_.write(block.text); break;
      case Kind::notice: target_.notice(block.text); break;
      case Kind::progress: target_.progress(block.label, block.text); break;
      case Kind::exit: target_.rank_exited(block.index, block.status, block.stopped); break;
    }
    lock.lock();
    if (block.kind != Kind::notice) queued_bytes_ -= block.text.size();
  }
}

}  // namespace davincirun
