// The rank tables a plan makes itself: one for this machine (--nproc) and a
// one-server table narrowed to some of its devices (--devices).
#pragma once

#include <string>
#include <vector>

#include "davincirun/rank_table.hpp"

namespace davincirun::detail {

/// A one-server table (format 1.0, server_id "127.0.0.1", no device_ip)
/// whose rank i runs on devices[i]; parsed by parse_rank_table like any
/// file, under the source name `source`.
RankTable one_server_table(const std::vector<int>& devices, const std::string& source);

/// `table` with only the devices in `devices` (physical ids), ranks
/// renumbered 0..k-1 in the table's order (2.0: rank_list's order, and
/// rank_count set), in the table's format, parsed again under the source
/// name `source`; the table's own warnings are kept. Throws OptionError
/// ("devices") for a table of more than one server or a device it does not
/// list.
RankTable narrowed_table(const RankTable& table, const std::vector<int>& devices, const std::string& source);

}  // namespace davincirun::detail
