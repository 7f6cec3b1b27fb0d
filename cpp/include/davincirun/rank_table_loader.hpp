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
  /// Time between two progress messages while waiting. Default 10 s.
  std::chrono::milliseconds progress_interval{10'000};
  /// Called from the calling thread when waiting starts and then every
  /// progress_interval, with one line saying what is awaited and how long is
  /// left. May be empty. An exception it throws ends the wait and propagates.
  std::function<void(const std::string&)> progress;
  /// Called before every retry (about once per retry_interval) while waiting;
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
/// Throws RankTableError: what parse_rank_table throws; kind io when the file
/// cannot be read (a directory with neither file: naming both). When the wait
/// times out, the detail starts "timed out after <T> s waiting for the rank
/// table: " and says the last state seen (the source names the file); the kind is io for a missing file,
/// bad_value for status "initializing", else that of the last error (empty,
/// syntax). With waiting off, a table whose status is not "completed" is
/// returned as is, as is (waiting or not) one whose status is neither
/// "initializing" nor "completed": the caller decides.
LoadedRankTable wait_for_rank_table(const std::string& path_or_dir, const RankTableLoadOptions& options = {});

}  // namespace davincirun
