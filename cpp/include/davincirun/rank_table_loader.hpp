// Finding and waiting for the rank table a platform writes.
//
// RANK_TABLE_FILE may name the table itself or a directory (ModelArts training
// jobs set /user/config): in a directory the table is jobstart_hccl.json, else
// hccl.json. Platforms write the table while the job starts (status
// "initializing", then "completed"), and the Kubernetes operator rewrites it in
// place (truncate, then write): a reader sees it missing, empty, half-written or
// initializing for a while, and waits.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "davincirun/rank_table.hpp"

namespace davincirun {

/// How wait_for_rank_table waits.
struct RankTableLoadOptions {
  /// How long to wait for a table that is missing, empty, cut short (still
  /// being written) or "initializing". 0 (or less): read once, no waiting.
  /// Default 300 s.
  std::chrono::milliseconds wait_timeout{300'000};
  /// Time between two reads while waiting. Default 1 s; at least 1 ms is used.
  std::chrono::milliseconds retry_interval{1000};
  /// Time between two progress lines while waiting. The first line comes
  /// with the second look at the table (retry_interval after the first, so
  /// within a second by default), the next ones every progress_interval.
  /// Default 30 s; at least 1 ms is used.
  std::chrono::milliseconds progress_interval{30'000};
  /// Called from the calling thread with each progress line: what is
  /// awaited and what was seen instead (a missing file with the name alike
  /// in its folder, a directory with what it holds), how long the wait has
  /// lasted of how long, and how to end it or not wait, e.g.
  /// "waiting for rank table /data/hcl.json: it does not exist (did you mean
  /// 'hccl.json'?); waited 1 s of 300 s; Ctrl-C stops, --wait-timeout 0 does
  /// not wait". May be empty. An exception it throws ends the wait and
  /// propagates.
  std::function<void(const std::string&)> progress;
  /// How the user turns waiting off, in the front end's words, which the
  /// progress lines quote: the CLI gives "--wait-timeout 0", Python
  /// "wait_timeout=0". Default "wait_timeout 0" (the field above).
  std::string no_wait_setting = "wait_timeout 0";
  /// How the user ends the wait, in the front end's words, which the
  /// progress lines quote: "Ctrl-C" (the default), a notebook's "interrupt
  /// (the stop button)". keep_waiting is how a caller honours it.
  std::string stop_name = "Ctrl-C";
  /// Called at least every 50 ms while waiting (and before every retry);
  /// may be empty. Throwing ends the wait and propagates: the way for a
  /// caller to honour Ctrl-C promptly.
  std::function<void()> keep_waiting;
};

/// A rank table and the file it was read from.
struct LoadedRankTable {
  RankTable table;
  /// The file read: absolute, symlinks resolved (what HCCL and torch_npu accept).
  std::string path;
};

/// Finds the rank table at `path_or_dir` (a file, or a directory holding
/// jobstart_hccl.json or hccl.json), reads and parses it, waiting as
/// `options` say. A table without "status" counts as completed. While
/// waiting, a missing file, an empty file, a text that stops before its JSON
/// does (a proper prefix of a JSON document: the syntax error is at the end
/// of the text, NUL bytes at its end not counted), and a table (even an
/// incomplete one) whose status is "initializing" are read again every
/// retry_interval; any other error is thrown at once, a syntax error before
/// the end of the text included (a finished file that is broken: kind
/// syntax, naming the file, line and column).
///
/// A path whose folder does not exist (or is not a folder) is not waited
/// for: a platform writes its table into a folder that exists, so the path
/// is mistyped. The error (kind io, at once) names that folder and the
/// nearest folder up that exists, with a name there alike the missing one.
///
/// Throws RankTableError: what parse_rank_table throws; kind io when the file
/// cannot be read (a missing file: with the name alike in its folder; a
/// directory with neither file: naming both and what it holds) or its folder
/// does not exist. When the wait times out, the detail starts "timed out
/// after <T> s waiting for the rank table: " and says the last state seen
/// as the progress lines do (the source names the file); the kind is io for
/// a missing file, bad_value for status "initializing", else that of the
/// last error (empty, syntax). With waiting off, a table whose status is not
/// "completed" is returned as is, as is (waiting or not) one whose status is
/// neither "initializing" nor "completed": the caller decides.
LoadedRankTable wait_for_rank_table(const std::string& path_or_dir, const RankTableLoadOptions& options = {});

}  // namespace davincirun
