#include "plan/peer_plan.hpp"

#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "common/sha256.hpp"
#include "davincirun/errors.hpp"

namespace davincirun::detail {

namespace {

int port_from(const Environment& launcher, const LaunchOptions& options, const std::string& digest,
              const JobEnvironment& job) {
  if (options.peer_port) return *options.peer_port;
  if (auto value = launcher.get("DAVINCIRUN_PEER_PORT"); value && !value->empty()) {
    return parse_port("DAVINCIRUN_PEER_PORT", *value);
  }
  return derived_port(digest, job.job_id, "DAVINCIRUN_PEER_PORT");
}

// LaunchOptions::peers = false wins; else the launcher's DAVINCIRUN_PEERS,
// for code that cannot pass peers=False (a 0.1.x-style script, a platform's
// wrapper): 0/off/false/no turn the channel off, 1/on/true/yes keep it.
bool peers_wanted(const LaunchOptions& options, const Environment& launcher) {
  if (!options.peers) return false;
  const std::string value = launcher.get("DAVINCIRUN_PEERS").value_or("");
  if (value.empty()) return true;
  for (const char* off : {"0", "off", "false", "no"}) {
    if (value == off) return false;
  }
  for (const char* on : {"1", "on", "true", "yes"}) {
    if (value == on) return true;
  }
  throw ConfigError(
      fmt::format("DAVINCIRUN_PEERS must be 0, off, false or no (each server's job on its own), or 1, "
                  "on, true or yes (the default: the servers' jobs stop together), got '{}'",
                  value));
}

}  // namespace

PeerPlan plan_peers(const LaunchOptions& options, const RankTable& table, std::size_t server_index,
                    const JobEnvironment& job, const Environment& launcher, const std::string& digest) {
  PeerPlan peers;
  peers.stall_timeout = options.stall_timeout;
  peers.peer_timeout = options.peer_timeout;
  peers.connect_timeout = options.wait_timeout;
  peers.server_index = server_index;
  peers.server_count = table.servers.size();
  peers.hub = job.rank_start == 0;
  peers.enabled = peers_wanted(options, launcher) && table.servers.size() > 1;
  if (!peers.enabled) return peers;
  peers.hub_address = job.master_addr;
  peers.port = port_from(launcher, options, digest, job);
  peers.server_ids.reserve(table.servers.size());
  for (const auto& server : table.servers) {
    if (server.rank_start == 0) peers.hub_index = peers.server_ids.size();
    peers.server_ids.push_back(server.server_id);
  }
  if (auto key = launcher.get("DAVINCIRUN_JOB_KEY"); key && !key->empty()) {
    peers.job_key = std::string(as_view(sha256(*key)));
    peers.key_from_environment = true;
  } else {
    // Every server computes the same key from what it alone reads: the
    // table (by its digest, made once for the job id and ports) and the job id.
    peers.job_key = std::string(
        as_view(hmac_sha256("davincirun peer channel v1", {digest, std::string_view("\0", 1), job.job_id})));
  }
  return peers;
}

}  // namespace davincirun::detail
