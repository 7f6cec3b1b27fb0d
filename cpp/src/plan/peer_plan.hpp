// The peer channel's part of a plan: who listens, where, with which key.
#pragma once

#include "davincirun/environment.hpp"
#include "davincirun/plan.hpp"

namespace davincirun::detail {

/// From the options, the table, this server, the job's values and the
/// table's digest (what the job id and ports are derived from). Reads
/// DAVINCIRUN_PEER_PORT and DAVINCIRUN_JOB_KEY from `launcher` (the
/// launcher's environment, never the ranks' extra variables). Throws
/// ConfigError for a DAVINCIRUN_PEER_PORT that is not a port.
PeerPlan plan_peers(const LaunchOptions& options, const RankTable& table, std::size_t server_index,
                    const JobEnvironment& job, const Environment& launcher, const std::string& digest);

}  // namespace davincirun::detail
