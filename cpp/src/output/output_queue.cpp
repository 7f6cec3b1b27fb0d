#include "davincirun/output_queue.hpp"

#include <algorithm>
#include <utility>

namespace davincirun {

namespace {

std::uint64_t count_lines(std::string_view text) {
  return static_cast<std::uint64_t>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

void OutputQueue::set_capacity(std::size_t bytes) {
  capacity_ = bytes;
  drop_to_capacity();
}

void OutputQueue::push_lines(std::size_t index, std::string_view lines) {
  if (lines.empty()) return;
  Queued entry;
  entry.kind = Kind::lines;
  entry.index = index;
  entry.text.assign(lines);
  entries_.push_back(std::move(entry));
  if (waiting_.size() <= index) waiting_.resize(index + 1, 0);
  waiting_[index] += lines.size();
  line_bytes_ += lines.size();
  drop_to_capacity();
}

void OutputQueue::push_notice(std::string_view lines) {
  if (lines.empty()) return;
  Queued entry;
  entry.kind = Kind::notice;
  entry.text.assign(lines);
  entries_.push_back(std::move(entry));
}

bool OutputQueue::push_progress(std::size_t index, std::string_view text) {
  if (line_bytes_ + progress_bytes_ + text.size() > capacity_) return false;
  Queued entry;
  entry.kind = Kind::progress;
  entry.index = index;
  entry.text.assign(text);
  progress_bytes_ += text.size();
  entries_.push_back(std::move(entry));
  return true;
}

void OutputQueue::push_exit(std::size_t index, ExitStatus status, bool stopped_by_launcher) {
  Queued entry;
  entry.kind = Kind::exit;
  entry.index = index;
  entry.status = status;
  entry.stopped_by_launcher = stopped_by_launcher;
  entries_.push_back(std::move(entry));
}

void OutputQueue::push_attempt(int attempt, const std::vector<pid_t>& pids) {
  Queued entry;
  entry.kind = Kind::attempt;
  entry.index = static_cast<std::size_t>(attempt);
  entry.pids = pids;
  entries_.push_back(std::move(entry));
}

void OutputQueue::push_status(const std::vector<RankStatus>& statuses) {
  Queued entry;
  entry.kind = Kind::status;
  entry.statuses = statuses;
  entries_.push_back(std::move(entry));
}

OutputQueue::Entry OutputQueue::pop() {
  Queued front = std::move(entries_.front());
  entries_.pop_front();
  if (front.kind == Kind::lines) {
    release(front, front.text.size() - front.offset);
    front.text.erase(0, front.offset);
  } else if (front.kind == Kind::progress) {
    progress_bytes_ -= front.text.size();
  }
  return std::move(static_cast<Entry&>(front));
}

std::string OutputQueue::take_lines(std::size_t budget) {
  std::string out;
  std::size_t taken = 0;  // bytes of rank lines
  while (!entries_.empty()) {
    Queued& front = entries_.front();
    if (front.kind == Kind::notice) {
      out += front.text;
      entries_.pop_front();
      continue;
    }
    if (front.kind != Kind::lines) break;
    const std::string_view rest = std::string_view(front.text).substr(front.offset);
    if (taken + rest.size() <= budget) {
      out += rest;
      taken += rest.size();
      release(front, rest.size());
      entries_.pop_front();
      continue;
    }
    // Part of this block: whole lines up to the budget, or one line to start with.
    const std::size_t room = taken < budget ? budget - taken : 0;
    std::size_t cut = room == 0 ? std::string_view::npos : rest.rfind('\n', room - 1);
    if (cut == std::string_view::npos) {
      if (taken > 0) break;
      cut = rest.find('\n');
    }
    out += rest.substr(0, cut + 1);
    release(front, cut + 1);
    front.offset += cut + 1;
    break;
  }
  return out;
}

std::uint64_t OutputQueue::take_dropped() noexcept { return std::exchange(dropped_, 0); }

void OutputQueue::release(Queued& entry, std::size_t bytes) {
  line_bytes_ -= bytes;
  waiting_[entry.index] -= bytes;
}

// Always the oldest lines of the rank with the most bytes waiting, and only
// down to what the next busiest rank holds: the ranks' shares even out, each
// keeping its newest lines. (Dropping from the busiest until the bound holds
// would drop all of a rank whose one large block lands on a full queue, its
// last words with it.)
void OutputQueue::drop_to_capacity() {
  while (line_bytes_ > capacity_) {
    std::size_t busiest = 0;
    std::size_t next = 0;  // bytes waiting of the next busiest rank
    for (std::size_t i = 1; i < waiting_.size(); ++i) {
      if (waiting_[i] > waiting_[busiest]) {
        next = waiting_[busiest];
        busiest = i;
      } else {
        next = std::max(next, waiting_[i]);
      }
    }
    const auto it = std::find_if(entries_.begin(), entries_.end(),
                                 [&](const Queued& e) { return e.kind == Kind::lines && e.index == busiest; });
    const std::string_view rest = std::string_view(it->text).substr(it->offset);
    // At least one line, at most what brings it level with the next.
    const std::size_t target = std::max<std::size_t>(1, std::min(line_bytes_ - capacity_, waiting_[busiest] - next));
    // Whole lines: up to the end of the line holding the target-th byte.
    const std::size_t newline = rest.find('\n', target - 1);
    if (rest.size() <= target || newline == std::string_view::npos || newline + 1 == rest.size()) {
      dropped_ += count_lines(rest);
      release(*it, rest.size());
      entries_.erase(it);
      continue;
    }
    const std::size_t cut = newline + 1;
    dropped_ += count_lines(rest.substr(0, cut));
    release(*it, cut);
    it->offset += cut;
  }
}

}  // namespace davincirun
