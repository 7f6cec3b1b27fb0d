#include "davincirun/polled_sink.hpp"

#include <algorithm>

#include "davincirun/log_streamer.hpp"

namespace davincirun {

void PolledSink::set_budget(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  budget_ = std::max<std::size_t>(1, std::min(bytes, capacity_bytes));
  queue_.set_capacity(std::min(capacity_bytes, budget_ + RankLog::max_line_bytes + 64));
  skipped_lines_ += queue_.take_dropped();
}

void PolledSink::write(std::size_t index, std::string_view lines) {
  if (lines.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    note_last_line(index, lines);
    queue_.push_lines(index, lines);
    skipped_lines_ += queue_.take_dropped();
  }
  ready_.notify_all();
}

void PolledSink::notice(std::string_view lines) {
  if (lines.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_notice(lines);
  }
  ready_.notify_all();
}

void PolledSink::progress(std::size_t index, std::string_view text) {
  std::lock_guard<std::mutex> lock(mutex_);
  set(progress_, index, text);
}

void PolledSink::rank_exited(std::size_t index, ExitStatus status, bool stopped_by_launcher) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    exits_.push_back(RankExit{index, status, stopped_by_launcher, attempt_});
  }
  ready_.notify_all();
}

void PolledSink::attempt_started(int attempt, const std::vector<pid_t>& pids) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    attempt_ = attempt;
    attempts_.push_back(Attempt{attempt, pids});
  }
  ready_.notify_all();
}

void PolledSink::ranks_status(const std::vector<RankStatus>& statuses) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const RankStatus& s : statuses) {
    auto same =
        std::find_if(statuses_.begin(), statuses_.end(), [&](const RankStatus& x) { return x.index == s.index; });
    if (same != statuses_.end()) {
      *same = s;
    } else {
      statuses_.push_back(s);
    }
  }
}

std::vector<RankStatus> PolledSink::take_status() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<RankStatus> out;
  out.swap(statuses_);
  return out;
}

PolledSink::Batch PolledSink::take(bool everything, bool lines) {
  std::lock_guard<std::mutex> lock(mutex_);
  Batch batch;
  batch.progress.swap(progress_);
  batch.last_lines.swap(last_lines_);
  batch.exits.swap(exits_);
  batch.attempts.swap(attempts_);
  if (!lines) return batch;
  batch.lines = queue_.take_lines(everything ? std::string::npos : budget_);
  batch.skipped_lines = std::exchange(skipped_lines_, 0);
  return batch;
}

void PolledSink::wake() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    woken_ = true;
  }
  ready_.notify_all();
}

bool PolledSink::wait(std::chrono::milliseconds timeout, bool on_output) {
  std::unique_lock<std::mutex> lock(mutex_);
  const bool ready = ready_.wait_for(lock, timeout, [&] {
    return woken_ || (on_output && (!queue_.empty() || skipped_lines_ > 0 || !exits_.empty() || !attempts_.empty()));
  });
  woken_ = false;
  return ready;
}

void PolledSink::set(Latest& latest, std::size_t index, std::string_view text) {
  for (auto& entry : latest) {
    if (entry.first == index) {
      entry.second.assign(text);
      return;
    }
  }
  latest.emplace_back(index, std::string(text));
}

// Each write() holds the lines of one read of one rank: its last line is
// what that rank said last.
void PolledSink::note_last_line(std::size_t index, std::string_view lines) {
  if (lines.size() < 2) return;
  const std::size_t nl = lines.rfind('\n', lines.size() - 2);
  std::string_view line = lines.substr(nl == std::string_view::npos ? 0 : nl + 1);
  line.remove_suffix(1);  // its '\n'
  set(last_lines_, index, line_text(line).substr(0, RankLog::max_progress_bytes));
}

}  // namespace davincirun
