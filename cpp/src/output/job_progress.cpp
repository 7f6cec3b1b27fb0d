#include "output/job_progress.hpp"

#include <string.h>  // memmem

#include <algorithm>
#include <chrono>
#include <utility>

#include <fmt/format.h>

#include "output/log_tail.hpp"

namespace davincirun::detail {

JobProgress::JobProgress(LineSink& console, Options options)
    : console_(console), options_(std::move(options)), ranks_(options_.labels.size()), slow_(options_.slow_window) {}

namespace {

// The line of `text` that holds byte `at`, without its '\n'.
std::string_view line_at(std::string_view text, std::size_t at) {
  const std::size_t begin = at == 0 ? 0 : text.rfind('\n', at - 1) + 1;  // npos + 1 == 0
  std::size_t end = text.find('\n', at);
  end = end == std::string_view::npos ? text.size() : end;
  return text.substr(begin, end - begin);
}

// Where the last "epoch" ("Epoch", "EPOCH") of `text` is, or npos. memmem(3)
// is vectorized: a search costs far less than a line-by-line look.
std::size_t last_epoch_word(std::string_view text) {
  std::size_t last = std::string_view::npos;
  for (const char* word : {"poch", "POCH"}) {
    const char* at = text.data();
    const char* const end = text.data() + text.size();
    while (const void* found = ::memmem(at, static_cast<std::size_t>(end - at), word, 4)) {
      const auto offset = static_cast<std::size_t>(static_cast<const char*>(found) - text.data());
      if (last == std::string_view::npos || offset > last) last = offset;
      at = static_cast<const char*>(found) + 4;
    }
  }
  return last;
}

}  // namespace

// A read's bytes (a flood brings thousands of lines a call) cost one look
// at their end, not a parse of each line: what a tick shows is the latest
// progress. The last of the final few finished lines that reports any is
// taken, after the last line naming an epoch before it (an epoch line
// followed by step lines sets both); then the unfinished line, a bar
// redrawn with '\r' or text awaiting its '\n'. What is skipped is a step
// between two ticks, and at worst an epoch's last step when the epoch
// length is learned (no total printed).
void JobProgress::output(std::size_t index, std::string_view bytes) {
  if (index >= ranks_.size() || bytes.empty()) return;
  const auto now = WallClock::now();
  Rank& r = ranks_[index];
  r.activity.add(bytes.size(), now);
  if (r.mid_line) {  // the rest of a line whose start was skipped is not read
    const std::size_t start = bytes.find_first_of("\n\r");
    if (start == std::string_view::npos) return;
    bytes.remove_prefix(bytes[start] == '\n' ? start + 1 : start);  // a '\r' starts a redraw: kept
    r.mid_line = false;
    if (bytes.empty()) return;
  }
  const std::size_t last_newline = bytes.rfind('\n');
  if (last_newline != std::string_view::npos) {
    read_finished(index, bytes.substr(0, last_newline + 1), now);
    r.unfinished.clear();
    r.redraw_pending = false;
    bytes.remove_prefix(last_newline + 1);
  }
  if (bytes.empty()) return;
  extend_unfinished(r.unfinished, r.redraw_pending, bytes);
  take(index, r.unfinished, now);
}

void JobProgress::output_skipped(std::size_t index, std::size_t bytes) {
  if (index >= ranks_.size() || bytes == 0) return;
  Rank& r = ranks_[index];
  r.activity.add(bytes, WallClock::now());
  r.unfinished.clear();
  r.redraw_pending = false;
  r.mid_line = true;
}

void JobProgress::extend_unfinished(std::string& line, bool& redraw_pending, std::string_view piece) {
  const std::string_view shown = shown_line(piece);
  if (shown.data() != piece.data() || redraw_pending) line.clear();  // drawn again from its start
  redraw_pending = !piece.empty() && piece.back() == '\r';
  if (line.size() < max_unfinished_bytes) line.append(shown.substr(0, max_unfinished_bytes - line.size()));
}

void JobProgress::read_finished(std::size_t index, std::string_view lines, WallClock::time_point now) {
  Rank& r = ranks_[index];
  constexpr std::size_t npos = std::string_view::npos;
  constexpr int tried = 4;         // lines from the end
  std::size_t end = lines.size();  // the end of a line, after its '\n'
  for (int i = 0; i < tried && end > 0; ++i) {
    const std::size_t text_end = end - 1;
    const std::size_t newline = text_end == 0 ? npos : lines.rfind('\n', text_end - 1);
    const std::size_t start = newline == npos ? 0 : newline + 1;
    end = start;
    std::string_view text = lines.substr(start, text_end - start);
    std::string joined;  // the read's first line ends the one left unfinished
    if (start == 0 && (!r.unfinished.empty() || r.redraw_pending)) {
      joined = r.unfinished;
      bool pending = r.redraw_pending;
      extend_unfinished(joined, pending, text);
      text = joined;
    } else {
      text = shown_line(text).substr(0, max_parsed_bytes);
    }
    const auto reading = parse_progress(text);
    if (!reading) continue;
    if (reading->epoch < 0 && start > 0) {
      const std::size_t epoch = last_epoch_word(lines.substr(0, start));
      if (epoch != npos) take(index, shown_line(line_at(lines, epoch)).substr(0, max_parsed_bytes), now);
    }
    if (r.progress.add(*reading, now)) r.changed = true;
    break;
  }
}

void JobProgress::write(std::size_t index, std::string_view lines) {
  if (index >= options_.shown.size() || options_.shown[index]) console_.write(index, lines);
}

void JobProgress::progress(std::size_t index, std::string_view text) {
  if (index >= options_.shown.size() || options_.shown[index]) console_.progress(index, text);
}

void JobProgress::rank_exited(std::size_t index, ExitStatus status, bool stopped_by_launcher) {
  if (index < ranks_.size()) {
    Rank& r = ranks_[index];
    r.running = false;
    if (!r.slow.empty() && !r.slow.back().to) r.slow.back().to = WallClock::now();  // slow until its end
  }
  console_.rank_exited(index, status, stopped_by_launcher);
}

void JobProgress::attempt_started(int attempt, const std::vector<pid_t>& pids) {
  tick();  // the last attempt's last word
  ranks_.assign(ranks_.size(), Rank{});
  slow_.reset();
  console_.attempt_started(attempt, pids);
}

void JobProgress::take(std::size_t index, std::string_view text, WallClock::time_point now) {
  if (index >= ranks_.size()) return;
  Rank& r = ranks_[index];
  if (const auto reading = parse_progress(text); reading && r.progress.add(*reading, now)) r.changed = true;
}

std::int64_t JobProgress::steps_per_epoch() const noexcept {
  std::int64_t steps = -1;
  std::int64_t longest = -1;
  for (const Rank& r : ranks_) {
    steps = std::max(steps, r.progress.steps());
    longest = std::max(longest, r.progress.longest_epoch());
  }
  // A printed total wins; an epoch's last step is its length when 1-based,
  // one short of it when 0-based: either orders the ranks the same.
  return steps > 0 ? steps : std::max<std::int64_t>(1, longest);
}

void JobProgress::tell(const std::string& text) {
  if (journal_) journal_(text);
  console_.notice(notice_line(text));
}

std::string JobProgress::slow_detail(std::size_t index, const SlowRanks::Change& change) const {
  const auto& mine = ranks_[index].progress;
  if (change.job_pace) {
    return fmt::format("at {} while the job's median across its servers is {:.0f} steps in, behind for {} s",
                       mine.text(), *change.job_pace,
                       std::chrono::duration_cast<std::chrono::seconds>(change.behind_for).count());
  }
  const auto& median = ranks_[change.median_index].progress;
  return fmt::format("at {} while {} (the median) is at {}, behind for {} s", mine.text(),
                     options_.labels[change.median_index], median.text(),
                     std::chrono::duration_cast<std::chrono::seconds>(change.behind_for).count());
}

void JobProgress::tick(WallClock::time_point now) {
  const std::int64_t per_epoch = steps_per_epoch();
  std::vector<SlowRanks::Standing> standings(ranks_.size());
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    if (ranks_[i].progress.known()) standings[i].position = ranks_[i].progress.position(per_epoch);
    standings[i].running = ranks_[i].running;
  }
  const std::string where = options_.server_id.empty() ? "" : " on server " + options_.server_id;
  std::optional<double> job_pace;
  {
    const std::lock_guard<std::mutex> lock(pace_mutex_);
    job_pace = job_pace_;
  }
  for (const auto& change : slow_.evaluate(standings, SlowRanks::Clock::now(), job_pace)) {
    Rank& r = ranks_[change.index];
    r.changed = true;
    if (change.slow) {
      r.slow.push_back({now - change.behind_for, std::nullopt, slow_detail(change.index, change)});
      tell(fmt::format("{}{} is slow: {}", options_.labels[change.index], where, r.slow.back().detail));
    } else if (!r.slow.empty() && !r.slow.back().to) {
      r.slow.back().to = now;
      if (r.running) {
        tell(fmt::format("{}{} caught up: now at {}", options_.labels[change.index], where, r.progress.text()));
      }
    }
  }
  ServerPace pace;
  if (const auto median = SlowRanks::median(standings, 1)) pace.position = median->first;
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    if (slow_.slow(i)) pace.slow.push_back(options_.labels[i]);
  }
  {
    const std::lock_guard<std::mutex> lock(pace_mutex_);
    server_pace_ = std::move(pace);
  }
  std::vector<RankStatus> statuses;
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    Rank& r = ranks_[i];
    const std::uint64_t rate = r.running ? r.activity.rate(now) : 0;
    std::string text = r.progress.text();
    if (!r.changed && rate == r.sent_rate && text == r.sent_progress) continue;
    RankStatus s;
    s.index = i;
    s.progress = text;
    s.bytes_per_s = rate;
    s.slow = slow_.slow(i);
    if (s.slow && !r.slow.empty()) s.slow_detail = r.slow.back().detail;
    r.sent_progress = std::move(text);
    r.sent_rate = rate;
    r.changed = false;
    statuses.push_back(std::move(s));
  }
  if (!statuses.empty()) console_.ranks_status(statuses);
}

ServerPace JobProgress::server_pace() const {
  const std::lock_guard<std::mutex> lock(pace_mutex_);
  return server_pace_;
}

void JobProgress::set_job_pace(std::optional<double> position) {
  const std::lock_guard<std::mutex> lock(pace_mutex_);
  job_pace_ = position;
}

}  // namespace davincirun::detail
