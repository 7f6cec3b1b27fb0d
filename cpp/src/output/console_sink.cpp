#include "davincirun/console_sink.hpp"

#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "davincirun/display_width.hpp"

namespace davincirun {

std::string rank_label(int rank) { return fmt::format("rank {}", rank); }

std::string process_label(const RankAssignment& process) {
  return process.role == ProcessRole::scheduler ? std::string(scheduler_label) : rank_label(process.rank);
}

std::string notice_line(std::string_view text) {
  std::string line(notice_prefix);
  line += text;
  line += '\n';
  return line;
}

std::string_view line_text(std::string_view line) noexcept {
  const std::size_t close = line.find(']');
  if (line.empty() || line.front() != '[' || close == std::string_view::npos) return line;
  std::string_view text = line.substr(close + 1);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  return text;
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
    } else if (line.rfind("[sched]", 0) == 0) {
      // Yellow: no rank's colour (rank_colour), so the scheduler stands apart.
      const std::size_t end = line.size() > 7 && line[7] == '+' ? 8 : 7;
      out += fmt::format("\x1b[33m{}\x1b[0m", line.substr(0, end));
      line.remove_prefix(end);
    } else if (line.rfind(notice_prefix, 0) == 0) {
      const std::string_view label = notice_prefix.substr(0, notice_prefix.size() - 1);  // without its space
      out += fmt::format("\x1b[1m{}\x1b[0m", label);
      line.remove_prefix(label.size());
    }
    out += line;
  }
  return out;
}

void FdLineSink::write(std::size_t /*index*/, std::string_view lines) {
  if (fd_ < 0) return;
  clear_status();
  if (style_.colour) {
    write_all(fd_, colourize_prefixes(lines), broken_);
  } else {
    write_all(fd_, lines, broken_);
  }
  draw_status();
}

void FdLineSink::progress(std::size_t index, std::string_view text) {
  if (!style_.status_line) return;
  auto it = std::find_if(progress_.begin(), progress_.end(), [&](const auto& p) { return p.first == index; });
  if (text.empty()) {
    if (it != progress_.end()) progress_.erase(it);
  } else if (it != progress_.end()) {
    it->second.assign(text);
  } else {
    progress_.emplace_back(index, std::string(text));
  }
  clear_status();
  draw_status();
}

namespace {

// "850 B/s", "1.2 KB/s": as the notebook's view says it (_job_view._rate).
std::string rate_text(double bytes_per_s) {
  const char* units[] = {"B/s", "KB/s", "MB/s"};
  std::size_t u = 0;
  for (; u < 2 && bytes_per_s >= 1024; ++u) bytes_per_s /= 1024;
  return u == 0 ? fmt::format("{:.0f} {}", bytes_per_s, units[u]) : fmt::format("{:.1f} {}", bytes_per_s, units[u]);
}

}  // namespace

std::string status_summary(const std::vector<RankStatus>& statuses, const std::vector<std::string>& labels,
                           const std::string& bars) {
  const auto label = [&](std::size_t i) { return i < labels.size() ? labels[i] : std::to_string(i); };
  std::string slow;
  std::string progress;
  double rate = 0;
  for (const RankStatus& s : statuses) {
    rate += static_cast<double>(s.bytes_per_s);
    if (s.slow) slow += (slow.empty() ? "slow: " : ", ") + label(s.index);
    // The lowest index that reports progress stands for the job (ranks in step print alike).
    if (progress.empty() && !s.progress.empty()) progress = "[" + label(s.index) + "] " + s.progress;
  }
  std::string out;
  for (const std::string& part : {slow, bars.empty() ? progress : bars, rate > 0 ? "output " + rate_text(rate) : ""}) {
    if (!part.empty()) out += (out.empty() ? "" : " | ") + part;
  }
  return out;
}

void FdLineSink::ranks_status(const std::vector<RankStatus>& statuses) {
  if (!style_.status_line) return;
  for (const RankStatus& s : statuses) {
    if (s.index < exited_.size() && exited_[s.index]) continue;  // its last rate, 0: nothing to show
    auto it = std::lower_bound(statuses_.begin(), statuses_.end(), s.index,
                               [](const RankStatus& a, std::size_t i) { return a.index < i; });
    if (it != statuses_.end() && it->index == s.index) {
      *it = s;
    } else {
      statuses_.insert(it, s);
    }
  }
  clear_status();
  draw_status();
}

void FdLineSink::rank_exited(std::size_t index, ExitStatus /*status*/, bool /*stopped_by_launcher*/) {
  if (exited_.size() <= index) exited_.resize(index + 1, false);
  exited_[index] = true;
  const auto it =
      std::find_if(statuses_.begin(), statuses_.end(), [&](const RankStatus& s) { return s.index == index; });
  if (it == statuses_.end()) return;
  statuses_.erase(it);
  clear_status();
  draw_status();
}

void FdLineSink::attempt_started(int /*attempt*/, const std::vector<pid_t>& /*pids*/) {
  exited_.clear();
  statuses_.clear();
}

void FdLineSink::clear_status() {
  if (!status_shown_) return;
  write_all(fd_, "\r\x1b[K", broken_);
  status_shown_ = false;
}

void FdLineSink::draw_status() {
  if (!style_.status_line || broken_ || (progress_.empty() && statuses_.empty())) return;
  winsize size{};
  // One column short of the width: a line filling the last column would
  // leave the cursor waiting to wrap, and "\r" would then redraw below it.
  const std::size_t width = ::ioctl(fd_, TIOCGWINSZ, &size) == 0 && size.ws_col > 1 ? size.ws_col - 1u : 79u;
  // "[rank 0] 45%|####  | [rank 1] 44%|### ", cut to the width in display
  // columns (a CJK character takes two), never inside a character; the
  // ranks' own escape sequences and control characters are left out. A
  // line one column too wide would wrap, and every redraw would leave a
  // stale copy above it.
  std::string bars;
  for (const auto& [index, text] : progress_) {
    const std::string label = index < labels_.size() ? labels_[index] : std::to_string(index);
    bars += (bars.empty() ? "[" : " | [") + label + "] " + drawable_text(text);
    if (display_width(bars) > width) break;
  }
  std::string line = status_summary(statuses_, labels_, bars);
  if (line.empty()) return;
  line.resize(fit_width(line, width));
  write_all(fd_, "\r" + line + "\x1b[K", broken_);
  status_shown_ = true;
}

void FdLineSink::notice(std::string_view lines) {
  if (notice_fd_ < 0) return;
  clear_status();
  bool& broken = notice_fd_ == fd_ ? broken_ : notice_broken_;
  if (style_.notice_colour) {
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

}  // namespace davincirun
