// Rank table parser: reads and validates an HCCL rank table (JSON).
//
// Formats, detected from the keys (see docs/rank-tables.md):
//   - 1.0 ("template 1"): "version": "1.0", server_list[].device[];
//   - 1.2 (SuperPoD): 1.0 plus super_device_id on every device and an optional
//     super_pod_list[].{super_pod_id, server_list[].server_id};
//   - 0.1 ("template 2", ModelArts): no version, group_list[].instance_list[]
//     .{pod_name, server_id, devices[]}, no rank ids; converted to 1.0 (below);
//   - 2.0 (Ascend 950 generation): "version": "2.0", rank_count and a flat
//     rank_list[].{rank_id, local_id, device_id, level_list[]}, no servers:
//     ranks are grouped into servers (below); it stays 2.0.
// Scalars are accepted as decimal strings or JSON integers (HCCL itself only
// accepts strings in 0.1 and 1.x, and only integers in 2.0; generators such as
// MindSpore's old merge_hccl.py write integers). Unknown fields are ignored. A
// UTF-8 byte order mark is skipped.
//
// Rules checked (HCCL and MindSpore, see docs/rank-tables.md), reported in this
// precedence when a table has several problems:
//   1. JSON syntax, including a key repeated in one object (kind duplicate,
//      found while the text is read);
//   2. each element's shape, types and required fields, in document order;
//   3. uniqueness: server_id, then device_id within a server, then rank_id,
//      then device_ip; then (1.2) super_pod_id, a server in super_pod_list,
//      super_device_id within a super pod; (0.1: pod_name, then the pod
//      number within a group come first); (2.0: then local_id within a server);
//   4. table-wide rules: rank ids exactly 0..N-1, each server's ranks one
//      contiguous block, server_count (2.0: rank_count) equal to the number of
//      servers (ranks); then (1.2) super_pod_list naming exactly the servers of
//      server_list; (0.1) pods of one server adjacent in rank order,
//      group_count, instance_count and device_count.
// Within 2, the format is decided first (it decides how the rest is read), and
// an object's required fields are checked when the object is reached, before
// its members. A duplicate is reported at its second occurrence.
//
// Values: device_id, rank_id, server_count (and 0.1's counts) are decimal
// digits only ("007" is 7; no sign, space, hex, fraction or exponent) or JSON
// integers, at most max_table_integer; super_device_id likewise, at most
// max_super_device_id. server_id is non-empty, at most 64 bytes, unique.
// device_ip is an IPv4/IPv6 literal, unique (compared as addresses), and
// required on every device when the table has more than one server; the
// placeholder "-.-.-.-" (a node whose NPU network is not configured) is an
// error there, and on a one-server table is read as absent with a warning.
//
// Format 2.0 (rules of HCCL's parser and guide, docs/rank-tables.md): integers
// as above but within HCCL's ranges (rank_count 1..65536, device_id and
// local_id 0..64, net_layer 0..7, ports 1..65535); level_list of 1 to 8
// entries in ascending net_layer; rank_addr_list addresses valid for their
// addr_type (IPV4, IPV6 literals; EID 32 hex digits). Servers: when any rank has
// a host_ip (an IP literal), every rank needs one and ranks of one address are
// one server (server_id and host_ip that address); otherwise ranks of one
// net_instance_id in their net_layer 0 entry are one server (server_id that
// id), which every rank then needs. Servers in the order their first rank
// appears, devices in rank_list order.
//
// Format 0.1 conversion: groups in file order, skipping those whose
// device_count is 0; within a group, pods ordered by the integer after the last
// '-' of pod_name; ranks numbered in that order, devices in file order. Pods
// that share a server_id (two pods on one host) become one server, since HCCL
// needs unique server ids; each device keeps the pod it came from. Error
// pointers always point into the original document.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "davincirun/enum_names.hpp"

namespace davincirun {

enum class RankTableFormat {
  v0_1,  ///< no "version", "group_list" (ModelArts); converted to 1.0
  v1_0,  ///< "version": "1.0"
  v1_2,  ///< "version": "1.2" (SuperPoD)
  v2_0,  ///< "version": "2.0" (Ascend 950 generation: rank_list, level_list)
};

/// to_string(): "0.1", "1.0", "1.2" or "2.0".
DAVINCIRUN_ENUM_NAMES(RankTableFormat, "0.1", "1.0", "1.2", "2.0");

/// One NPU of a server, as listed in the table.
struct RankTableDevice {
  int device_id = 0;                            ///< physical NPU number (N of /dev/davinciN), >= 0
  int rank_id = 0;                              ///< global rank, 0..world_size-1
  std::optional<std::string> device_ip;         ///< IPv4/IPv6 literal; optional on one-server tables
  std::optional<std::int64_t> super_device_id;  ///< format 1.2 only (always set there)
  std::optional<std::string> pod_name;          ///< format 0.1 only: the pod this device belongs to
  std::optional<int> local_id;                  ///< format 2.0 only (always set there): 0..64, unique per server
};

/// One server (machine or pod) of the table.
struct RankTableServer {
  /// Non-empty, unique; 1.x and 0.1: at most 64 characters. 2.0: its ranks'
  /// host_ip, else their net_layer 0 net_instance_id (at most 1024 bytes).
  std::string server_id;
  std::optional<std::string> host_ip;       ///< Kubernetes operator tables; 2.0: the ranks' host_ip
  std::optional<std::string> container_ip;  ///< Kubernetes operator tables
  std::vector<RankTableDevice> devices;     ///< in file order (0.1: rank order); never empty
  int rank_start = 0;                       ///< smallest rank_id on this server
  /// Format 0.1 only: the pods merged into this server, in rank order (more
  /// than one when pods share a server_id). Empty for 1.x tables.
  std::vector<std::string> pod_names;
};

/// A super pod of a format 1.2 table (super_pod_list).
struct RankTableSuperPod {
  std::string super_pod_id;             ///< as written (an integer is read as its decimal text)
  std::vector<std::string> server_ids;  ///< in file order; each names a server of the table
};

/// A validated rank table.
struct RankTable {
  RankTableFormat format = RankTableFormat::v1_0;  ///< the format of the file as read
  /// "completed" when absent from the file. Not checked: a table still
  /// "initializing" is returned as such (the caller decides; see
  /// wait_for_rank_table in rank_table_loader.hpp).
  std::string status;
  std::vector<RankTableServer> servers;       ///< in file order (0.1: rank order); never empty
  int world_size = 0;                         ///< total number of ranks (RANK_SIZE)
  std::vector<RankTableSuperPod> super_pods;  ///< format 1.2 with super_pod_list; else empty
  /// Problems that do not stop a launch, each "<source>: <pointer>: <what>".
  std::vector<std::string> warnings;
  /// The table the ranks should read (write_normalized_rank_table): format 1.0
  /// (1.2 when read from 1.2), every scalar a decimal string, server_count and
  /// status present, placeholder device_ips dropped, unknown fields of a 1.x
  /// file kept; a 0.1 table converted to 1.0. A 2.0 table stays 2.0, its
  /// integers JSON integers (as HCCL reads them), status present, unknown
  /// fields kept. JSON text, ends without newline.
  std::string normalized_json;
  /// wide_hash64 of normalized_json (common/wide_hash.hpp), the source of the
  /// job id and ports every server derives alike. Made beside the text where
  /// that saves time (large 1.x tables); nullopt: hashed from the text when
  /// needed. Whoever changes normalized_json resets it.
  std::optional<std::uint64_t> normalized_hash;
};

/// Largest accepted rank_id / device_id / server_count (2.0: rank_id). Larger values are reported as out of range.
inline constexpr std::int64_t max_table_integer = 1'000'000;
/// Largest accepted super_device_id (HCCL reads it as a 32-bit unsigned integer).
inline constexpr std::int64_t max_super_device_id = 4'294'967'295;

/// Parses and validates the JSON text of a rank table.
/// `source` names the document in error messages (usually its path).
/// Throws RankTableError (kinds empty, syntax, shape, missing, bad_value,
/// duplicate, inconsistent, unsupported). Syntax errors give a 1-based line
/// and byte column (a BOM is not counted) and the 0-based byte offset in the
/// text (not for JSON nested deeper than 64 levels, nor for an object of more
/// than 256 keys, both refused while parsing); a number beyond a double's
/// range is a syntax error. Syntax errors have no pointer, nor have the rank
/// numbering and block rules.
RankTable parse_rank_table(std::string_view text, const std::string& source);

/// Reads the file at `path` and parses it with parse_rank_table. No directory
/// lookup and no waiting (see wait_for_rank_table in rank_table_loader.hpp).
/// Throws RankTableError (kind io when the file cannot be opened or read, is a
/// directory or not a regular file, or is larger than 64 MiB).
RankTable load_rank_table(const std::string& path);

/// Writes `table.normalized_json` (and a newline) to a new file at `path`,
/// created with mode 0600; fails if `path` exists, even as a symlink
/// (O_CREAT|O_EXCL|O_NOFOLLOW). HCCL wants the name to end in ".json". A
/// partly written file is removed. Throws SystemError (naming the path), or
/// std::invalid_argument when `table` did not come from parse_rank_table.
void write_normalized_rank_table(const RankTable& table, const std::string& path);

/// Writes `table.normalized_json` (and a newline) to `path` for people and
/// other machines to read: mode 0644, atomically (a temporary file in the
/// same directory, renamed over `path`), so a reader never sees part of it;
/// an existing file at `path` is replaced. What davincirun --write-rank-table
/// and --merge-rank-tables write. Throws SystemError (naming the path), or
/// std::invalid_argument when `table` did not come from parse_rank_table.
void write_rank_table_file(const RankTable& table, const std::string& path);

}  // namespace davincirun
