// Device allocator: one rank per device of this machine's server (found by
// server_identity.hpp), with physical and logical device ids.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "davincirun/job_types.hpp"
#include "davincirun/machine_rank_table.hpp"
#include "davincirun/rank_table.hpp"

namespace davincirun {

/// Parses ASCEND_RT_VISIBLE_DEVICES: comma-separated logical ids in strictly
/// ascending order (the Ascend runtime reads them so and silently stops at
/// the first invalid one, so anything else is refused). Throws ConfigError.
std::vector<int> parse_visible_devices(const std::string& value);

/// One assignment per device of `table.servers[server_index]`, ordered by rank.
///
/// Logical device id (facts: docs/environment.md): the position of the
/// physical id among `present` (sorted /dev/davinciN ids) when that is not
/// empty, else among the server's table device ids, sorted — never the
/// position in the table's list. Then, when `rt_visible`
/// (ASCEND_RT_VISIBLE_DEVICES) is given, the position of that logical id in
/// it. Throws ConfigError when a device of the server is missing from a
/// non-empty `present` or from `rt_visible`.
std::vector<RankAssignment> allocate_ranks(const RankTable& table, std::size_t server_index,
                                           const std::vector<int>& present,
                                           const std::optional<std::vector<int>>& rt_visible = std::nullopt);

/// The same for one server, e.g. LocalServer::server (narrowed to this pod).
std::vector<RankAssignment> allocate_ranks(const RankTableServer& server, const std::vector<int>& present,
                                           const std::optional<std::vector<int>>& rt_visible = std::nullopt);

}  // namespace davincirun
