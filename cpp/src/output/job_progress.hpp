// The supervisor's watch of its ranks' output: for every rank, its output
// over time and the progress its lines report (rank_activity.hpp), which
// ranks fall behind (slow_ranks.hpp), and, at most once a second, what
// changed (LineSink::ranks_status()) for the live views, on each tick(). A LineSink in front
// of the console: every call is passed on, a hidden rank's lines excepted.
// It reads the ranks' raw output (output()), so a console that takes no
// lines (a job's stdout on /dev/null) has none made for it.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "davincirun/console_sink.hpp"
#include "output/rank_activity.hpp"
#include "output/slow_ranks.hpp"

namespace davincirun::detail {

/// A time a rank was slow (the record's ranks[].slow).
struct SlowSpell {
  WallClock::time_point from;
  std::optional<WallClock::time_point> to;  ///< none while it still is
  std::string detail;
};

class JobProgress final : public LineSink {
 public:
  struct Options {
    std::vector<std::string> labels;           ///< by index: "rank 3", "sched"
    std::vector<bool> shown;                   ///< by index: its lines reach the console
    std::string server_id;                     ///< named in the slow notices
    std::chrono::milliseconds slow_window{0};  ///< zero: no rank is ever slow
  };
  /// `console`: where every call goes on (it must outlive this).
  JobProgress(LineSink& console, Options options);

  void write(std::size_t index, std::string_view lines) override;
  void notice(std::string_view lines) override { console_.notice(lines); }
  bool wants_lines() const noexcept override { return console_.wants_lines(); }
  void progress(std::size_t index, std::string_view text) override;
  bool wants_progress() const noexcept override { return console_.wants_progress(); }
  /// Counts the bytes and reads the progress of the read's last few
  /// finished lines and of the line still unfinished (see job_progress.cpp).
  void output(std::size_t index, std::string_view bytes) override;
  /// Counts them; the next output() may start mid-line, so its first line is not read.
  void output_skipped(std::size_t index, std::size_t bytes) override;
  bool wants_output() const noexcept override { return true; }
  void rank_exited(std::size_t index, ExitStatus status, bool stopped_by_launcher) override;
  void attempt_started(int attempt, const std::vector<pid_t>& pids) override;

  /// Called with each notice this makes (a rank slow, caught up), for the journal.
  void set_journal(std::function<void(const std::string&)> journal) { journal_ = std::move(journal); }

  std::size_t size() const noexcept { return ranks_.size(); }
  const ActivityHistory& activity(std::size_t index) const { return ranks_.at(index).activity; }
  const ProgressHistory& progress_of(std::size_t index) const { return ranks_.at(index).progress; }
  const std::vector<SlowSpell>& slow_spells(std::size_t index) const { return ranks_.at(index).slow; }
  /// The length of an epoch in steps, as the ranks printed it (a total, or
  /// the longest epoch seen); 1 when unknown.
  std::int64_t steps_per_epoch() const noexcept;
  /// Looks at the ranks: who is slow, what changed for the live views.
  /// Call about once a second (Supervisor::set_ticker()).
  void tick(WallClock::time_point now = WallClock::now());

  /// A job of several servers (peers/peer_pace.cpp). This server's pace as
  /// of the last tick(): its ranks' upper median position in steps (epochs
  /// counted as this server's ranks print their length; none before any
  /// reported progress), and the labels of its slow ranks. Thread-safe.
  ServerPace server_pace() const;
  /// The job's pace (every server's upper median) to compare these ranks
  /// with from the next tick(); none: with each other. Thread-safe.
  void set_job_pace(std::optional<double> position);

 private:
  struct Rank {
    ActivityHistory activity;
    ProgressHistory progress;
    std::vector<SlowSpell> slow;
    bool running = true;
    bool changed = false;
    std::string sent_progress;
    std::uint64_t sent_rate = 0;
    // The unfinished line as a terminal shows it (its first
    // max_unfinished_bytes), and whether a '\r' ended it: the next text
    // then draws it again from its start.
    std::string unfinished;
    bool redraw_pending = false;
    bool mid_line = false;  // bytes were skipped: the next output() may start inside a line
  };
  /// What of an unfinished line is kept: as much as the console shows of it.
  static constexpr std::size_t max_unfinished_bytes = 1024;
  /// The start of a finished line that is parsed: progress is said early in it.
  static constexpr std::size_t max_parsed_bytes = std::size_t{64} * 1024;
  static void extend_unfinished(std::string& line, bool& redraw_pending, std::string_view piece);
  void read_finished(std::size_t index, std::string_view lines, WallClock::time_point now);
  void take(std::size_t index, std::string_view text, WallClock::time_point now);
  void tell(const std::string& text);
  std::string slow_detail(std::size_t index, const SlowRanks::Change& change) const;

  LineSink& console_;
  Options options_;
  std::vector<Rank> ranks_;
  SlowRanks slow_;
  std::function<void(const std::string&)> journal_;
  mutable std::mutex pace_mutex_;  // the paces cross to the peer agent's thread
  ServerPace server_pace_;
  std::optional<double> job_pace_;
};

}  // namespace davincirun::detail
