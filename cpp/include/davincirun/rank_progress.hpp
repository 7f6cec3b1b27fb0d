// A rank's progress as its output tells it, and what the launcher's views
// show of each rank while the job runs (RankStatus).
//
// The lines read (parse_progress(); docs/job-record.md lists them):
//   tqdm and the bars built on it (Hugging Face, Lightning, MindSpore's
//   own): "45%|####    | 45/100 [00:03<00:04, 12.1it/s]", "45it [00:03, ...]"
//   Keras: "Epoch 3/10", then "45/100 [=====>....] - ETA: 3s - loss: 0.6"
//   MindSpore's LossMonitor (mindspore/train/callback/_loss.py, 2.x):
//   "epoch: 1 step: 45, loss is 2.30"
//   plain words: "epoch 3", "Epoch [3/10]", "step 45", "Step: 45/100",
//   "iter 45", "iteration=45", "batch 45/100" (any case)
// A number must follow its word directly (after ':', '=', '[', '#' or
// spaces), so "epoch time: 120 ms" (MindSpore's TimeMonitor) and "steps
// per second" are not progress.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "davincirun/fields.hpp"

namespace davincirun {

/// What one line says of progress; -1: the line does not say.
struct ProgressReading {
  std::int64_t epoch = -1;   ///< the epoch number as printed (0- or 1-based alike)
  std::int64_t epochs = -1;  ///< the number of epochs ("Epoch 3/10": 10)
  std::int64_t step = -1;    ///< the step within the epoch, or the global step when no epoch is printed
  std::int64_t steps = -1;   ///< steps in the epoch ("45/100": 100)
};

/// The progress `line` reports (one line of a rank's output, or the text of a
/// line redrawn with '\r'); nothing when it reports none. Numbers above
/// 10^12 are not progress. Never throws; linear in the line's length.
std::optional<ProgressReading> parse_progress(std::string_view line) noexcept;

/// One rank's state in the live views (the notebook's status table, the
/// terminal's status line), sent at most once a second while it changes.
struct RankStatus {
  std::size_t index = 0;  ///< the rank's index in its job (not its rank id)
  /// Its progress in short words ("epoch 2 step 45/100"); "" while it has
  /// printed none of the lines above.
  std::string progress;
  /// Bytes of output a second over the last 5 s (lines and redrawn bars as
  /// the console sees them; the log file gets every byte regardless).
  std::uint64_t bytes_per_s = 0;
  /// Behind the other ranks for longer than SupervisorOptions::slow_window
  /// (slow_ranks.hpp states the rule); false again once it caught up.
  bool slow = false;
  /// Why it is slow: "step 12 while the median is 40, for 31 s"; "" when not.
  std::string slow_detail;
};

constexpr auto fields_of(const RankStatus*) {
  using S = RankStatus;
  return std::make_tuple(
      field("index", &S::index, "The rank's index in its job."),
      field("progress", &S::progress, "Its progress in words; \"\" when none was printed.").as(FieldText::any),
      field("bytes_per_s", &S::bytes_per_s, "Output bytes a second over the last 5 s."),
      field("slow", &S::slow, "Behind the other ranks for longer than the slow window."),
      field("slow_detail", &S::slow_detail, "Why it is slow; \"\" when it is not."));
}

}  // namespace davincirun
