// Device allocator: one rank per device of this machine's server (found by
// server_identity.hpp), with physical and logical device ids.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "davincirun/rank_table.hpp"

namespace davincirun {

/// What a process of a job is.
enum class ProcessRole {
  rank,       ///< a training process: one per device (a MindSpore "worker" in dynamic-cluster mode)
  scheduler,  ///< MindSpore's dynamic-cluster scheduler (MS_ROLE=MS_SCHED): no device, no rank
};

/// "rank" or "scheduler".
const char* to_string(ProcessRole role) noexcept;

/// How messages name a process of a job: "rank 3", or "scheduler" for
/// ProcessRole::scheduler (and for any negative `rank`, which only the
/// scheduler has).
std::string process_name(ProcessRole role, int rank);

/// One process to start on this machine.
struct RankAssignment {
  /// A scheduler has rank, local_rank and both device ids -1 and no device_ip.
  ProcessRole role = ProcessRole::rank;
  int rank = 0;                ///< global rank (RANK_ID, RANK)
  int local_rank = 0;          ///< rank - rank_start of this server (LOCAL_RANK)
  int physical_device_id = 0;  ///< the table's device_id: N of /dev/davinciN on the host
  int logical_device_id = 0;   ///< DEVICE_ID / ASCEND_DEVICE_ID as the runtime numbers devices here
  std::optional<std::string> device_ip;
};

/// The physical ids N of every /dev/davinciN under `dev_dir` (the NPUs this
/// machine or container can see), sorted ascending. Empty when there are none
/// (as on machines without NPUs) or `dev_dir` cannot be read.
std::vector<int> present_devices(const std::string& dev_dir = "/dev");

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
