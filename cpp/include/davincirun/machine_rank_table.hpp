// The rank table of this machine alone (one server), made from what the
// machine shows: its NPUs (/dev/davinci<N>), their addresses (the
// address_<N>=<ip> lines of /etc/hccn.conf, which hccn_tool writes) and its
// own address. What `davincirun --write-rank-table` and Python's
// write_rank_table() write; tables of several machines are then merged
// (rank_table_merge.hpp). Layout (docs/rank-tables.md): format 1.0, every
// scalar a decimal string, ranks 0..N-1 in ascending physical device id,
//
//   {"version": "1.0", "server_count": "1",
//    "server_list": [{"server_id": "10.0.0.11",
//                     "device": [{"device_id": "0", "device_ip": "192.1.11.10", "rank_id": "0"}, ...],
//                     "host_nic_ip": "reserve"}],
//    "status": "completed"}
//
// as MindSpore's hccl_tools.py writes it (host_nic_ip is the field HCCL's
// examples reserve).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "davincirun/rank_table.hpp"

namespace davincirun {

/// The physical ids N of every /dev/davinciN under `dev_dir` (the NPUs this
/// machine or container can see), sorted ascending. Empty when there are none
/// (as on machines without NPUs) or `dev_dir` cannot be read.
std::vector<int> present_devices(const std::string& dev_dir = "/dev");

/// What machine_rank_table() lists, and where it looks.
struct MachineRankTableOptions {
  /// This machine's server_id; nullopt (default): its address, as
  /// MachineRankTable::server_reason says: the IPv4 address of the interface
  /// of the default route (/proc/net/route), else the first IPv4 address of
  /// an interface that is up (loopback and 169.254/16 left out).
  std::optional<std::string> server_id;
  /// Physical ids of the devices to list (each must be present); nullopt
  /// (default): every /dev/davinci<N>.
  std::optional<std::vector<int>> devices;
  /// The directory whose dev/ and etc/hccn.conf are read: "/" (default).
  /// Another one serves tests (a fake root with regular files named
  /// davinci<N>) and containers that see the host's files elsewhere. The
  /// machine's addresses are its own whatever this says.
  std::string system_root = "/";
};

/// This machine's table, validated, and what a user should know of it.
struct MachineRankTable {
  RankTable table;            ///< one server; write it with write_rank_table_file
  std::string server_reason;  ///< why server_id is what it is, e.g. "given"
  /// Devices listed without a device_ip (no address_<N> line, or no
  /// hccn.conf): one server needs none, but a merged table needs one on
  /// every device, so merging this table will be refused. Each a sentence.
  std::vector<std::string> warnings;
};

/// Lists this machine's devices (digits-only /dev/davinci<N> under
/// `system_root`; davinci_manager and the like are not NPUs) with their
/// addresses from <system_root>/etc/hccn.conf, ranks 0..N-1 in ascending
/// physical id, and validates the table with parse_rank_table.
/// Throws ConfigError (no /dev/davinci<N>; hccn.conf unreadable or with a
/// malformed address line, naming file and line), OptionError ("devices": a
/// device not present or given twice; "server_id": none given and no address
/// found, or one parse_rank_table refuses, e.g. longer than 64 bytes).
MachineRankTable machine_rank_table(const MachineRankTableOptions& options = {});

}  // namespace davincirun
