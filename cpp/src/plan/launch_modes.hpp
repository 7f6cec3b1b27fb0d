// The job-wide values of the two launch modes for TensorFlow: TF_CONFIG's
// cluster (tf-config) and CANN's CM_* variables (cm). Every server computes
// them alike from the table, without talking to the others.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "davincirun/environment.hpp"
#include "davincirun/rank_table.hpp"
#include "davincirun/server_identity.hpp"

namespace davincirun::detail {

/// Where the other servers reach `server`: its host_ip, else its
/// container_ip, else its server_id (an address or a host name).
std::string server_address(const RankTableServer& server);

/// TF_CONFIG's "cluster" value: {"worker": ["<host>:<port>", ...]}, one
/// entry per rank in rank order. One server: host 127.0.0.1 and, when this
/// launcher starts every rank (`ports_seed` empty), a free port per rank,
/// all held open until every one is found so that no two are alike. Several
/// launchers: the host is server_address() (an IPv6 literal in brackets)
/// and rank r's port is derived_port(ports_seed, job_id, "TF_CONFIG") plus
/// r's position on its server, so every launcher lists the same ports; the
/// ports of this server's ranks (`local`) are checked free here, where they
/// will listen. Throws ConfigError for a port taken, SystemError when no
/// free port can be had.
std::string tf_cluster_json(const RankTable& table, const LocalServer& local, const std::string& job_id,
                            const std::string& ports_seed);

/// CM_CHIEF_DEVICE and CM_WORKER_IP into `job` (whose master_addr is
/// CM_CHIEF_IP). The chief device is rank 0's logical device id: from
/// `ranks` (this server's assignments) when rank 0 runs here, else as
/// allocate_ranks() numbers the devices of rank 0's server when it cannot
/// see them. The worker address is 127.0.0.1 on a one-server table, else
/// job.socket_address (the interface this server's peers reach it on),
/// else server_address() of this server. Throws ConfigError when the
/// chief's or this server's address is not an IP address: CANN reads both
/// as IPv4 or IPv6 literals.
void plan_cm(JobEnvironment& job, const RankTable& table, const LocalServer& local,
             const std::vector<RankAssignment>& ranks);

}  // namespace davincirun::detail
