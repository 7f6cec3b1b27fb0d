// Rank table parser: reads and validates an HCCL rank table (JSON).
//
// Supported now: format 1.0 ("template 1": version "1.0", server_list[].device[]).
// Scalars are accepted as decimal strings or JSON integers (HCCL itself only
// accepts strings; generators such as MindSpore's old merge_hccl.py write
// integers). Unknown fields are ignored. A UTF-8 byte order mark is skipped.
//
// Rules checked (HCCL and MindSpore, see docs/rank-tables.md), reported in this
// precedence when a table has several problems:
//   1. JSON syntax;
//   2. each element's shape, types and required fields, in document order;
//   3. uniqueness: server_id, then device_id within a server, then rank_id,
//      then device_ip;
//   4. table-wide rules: rank ids exactly 0..N-1, each server's ranks one
//      contiguous block, server_count equal to the number of servers.
// Within 2, `version` is checked first (it decides how the rest is read), and
// an object's required fields are checked when the object is reached, before
// its members. A duplicate is reported at its second occurrence.
//
// Values: device_id, rank_id and server_count are decimal digits only ("007"
// is 7; no sign, space, hex, fraction or exponent) or JSON integers, at most
// max_table_integer. server_id is non-empty, at most 64 bytes, unique.
// device_ip is an IPv4/IPv6 literal (not the "-.-.-.-" placeholder), unique
// (compared as addresses), and required on every device when the table has
// more than one server.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace davincirun {

enum class RankTableFormat {
  v1_0,  ///< "version": "1.0"
};

/// "1.0" for v1_0.
std::string_view to_string(RankTableFormat format);

/// One NPU of a server, as listed in the table.
struct RankTableDevice {
  int device_id = 0;                     ///< physical NPU number (N of /dev/davinciN), >= 0
  int rank_id = 0;                       ///< global rank, 0..world_size-1
  std::optional<std::string> device_ip;  ///< IPv4/IPv6 literal; optional on one-server tables
};

/// One server (machine or pod) of the table.
struct RankTableServer {
  std::string server_id;                    ///< non-empty, unique, at most 64 characters
  std::optional<std::string> host_ip;       ///< Kubernetes operator tables
  std::optional<std::string> container_ip;  ///< Kubernetes operator tables
  std::vector<RankTableDevice> devices;     ///< in file order; never empty
  int rank_start = 0;                       ///< smallest rank_id on this server
};

/// A validated rank table.
struct RankTable {
  RankTableFormat format = RankTableFormat::v1_0;
  std::string status;                    ///< "completed" when absent from the file
  std::vector<RankTableServer> servers;  ///< in file order; never empty
  int world_size = 0;                    ///< total number of ranks (RANK_SIZE)
};

/// Largest accepted rank_id / device_id / server_count. Larger values are reported as out of range.
inline constexpr std::int64_t max_table_integer = 1'000'000;

/// Parses and validates the JSON text of a rank table.
/// `source` names the document in error messages (usually its path).
/// Throws RankTableError (kinds empty, syntax, shape, missing, bad_value,
/// duplicate, inconsistent, unsupported). Syntax errors give a 1-based line
/// and byte column (a BOM is not counted) and the 0-based byte offset in the
/// text (not for JSON nested deeper than 64 levels, which is refused while
/// parsing); they have no pointer, nor have the rank numbering and block rules.
RankTable parse_rank_table(std::string_view text, const std::string& source);

/// Reads the file at `path` and parses it with parse_rank_table.
/// Throws RankTableError (kind io when the file cannot be opened or read, is a
/// directory or not a regular file, or is larger than 64 MiB).
RankTable load_rank_table(const std::string& path);

}  // namespace davincirun
