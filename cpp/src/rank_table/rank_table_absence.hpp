// What a rank table path that finds nothing has instead, for the messages
// of wait_for_rank_table: a folder that does not exist (and the nearest one
// up that does), the names alike in a folder that does, what a directory
// holds.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace davincirun::detail {

/// The folder `path` is in, as written: "/a" for "/a/b" and "/a/b/", "."
/// for "b", "/" for "/b" and "/".
std::string folder_of(const std::string& path);

/// At most this many edits from a name typed, a name is offered as "did you
/// mean": a quarter of the typed name's length, at least 1 and at most 3.
/// "hcl.json" (8) finds "hccl.json" (1 edit); "x.json" (6) finds "y.json"
/// but not "xy.jsn".
std::size_t close_enough(std::size_t typed_length);

/// When the folder `path` is in does not exist or is not a folder: the
/// detail of the error, naming that folder and the nearest folder up that
/// exists, and a name there alike the first missing one, e.g. "the folder
/// /data/tabels does not exist (the nearest that exists is /data; did you
/// mean /data/tables?)". nullopt when the folder exists, or when that
/// cannot be told (a folder on the way may not be searched).
std::optional<std::string> missing_folder(const std::string& path);

/// For a file `path` that does not exist in a folder that does: what the
/// folder has instead, to follow "it does not exist": " (did you mean
/// 'hccl.json'?)" when a name is close_enough(), else " (the nearest name in
/// /data is 'train.py')", or " (/data is empty)"; "" when the folder cannot
/// be read.
std::string absent_file_note(const std::string& path);

/// For a directory holding none of `wanted`: what it holds, the names
/// nearest to the wanted ones first, e.g. " (it holds 'hccl_8p.json',
/// 'logs' and 3 more)", or " (it is empty)"; "" when it cannot be read.
std::string directory_note(const std::string& dir, const std::vector<std::string_view>& wanted);

}  // namespace davincirun::detail
