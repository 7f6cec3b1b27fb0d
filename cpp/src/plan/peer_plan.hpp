// The peer channel's part of a plan: who listens, where, with which key.
#pragma once

#include "davincirun/environment.hpp"
#include "davincirun/plan.hpp"

namespace davincirun::detail {

/// From the options, the table, this server and the job's values. Reads
/// DAVINCIRUN_PEER_PORT and DAVINCIRUN_JOB_KEY from `launcher` (the
/// launcher's environment, never the ranks' extra variables). Throws
/// ConfigError for a DAVINCIRUN_PEER_PORT that is not a port.
PeerPlan plan_peers(const LaunchOptions& options, const RankTable& table, std::size_t server_index,
                    const JobEnvironment& job, const Environment& launcher);

}  // namespace davincirun::detail
