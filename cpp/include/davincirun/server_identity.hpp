// Server identity: which server of the rank table this machine is, and
// which of its devices are this machine's (this pod's, when pods share it).
//
// Rules, tried in order; the first rule that matches decides (reference:
// docs/rank-tables.md, "Which server is this machine"):
//   1. an explicit server id (server_id= / --server-id), matched exactly;
//   2. pod name: MA_CURRENT_INSTANCE_NAME, else BATCH_TASK_CURRENT_INSTANCE,
//      against the pod_names of a 0.1 table;
//   3. container_ip against POD_IP, MA_CURRENT_IP and the interface addresses;
//   4. host_ip or server_id against MA_CURRENT_HOST_IP and XDL_IP;
//   5. server_id against the interface addresses, the host name and
//      SLURMD_NODENAME (Slurm's name for the node, srun(1) of Slurm 22.05);
//   6. the engine's index of this agent, taken as the position of the server
//      in the table (servers in rank order), one agent per server:
//      OMPI_COMM_WORLD_RANK (Open MPI; its OMPI_COMM_WORLD_SIZE must be the
//      number of servers and OMPI_COMM_WORLD_LOCAL_SIZE 1), else SLURM_NODEID
//      (Slurm; SLURM_STEP_NUM_NODES, else SLURM_JOB_NUM_NODES / SLURM_NNODES,
//      the number of servers when set, SLURM_LOCALID 0), else VC_TASK_INDEX
//      (else VK_TASK_INDEX; Volcano's env plugin; a job of one task: at most
//      one VC_<task>_NUM, the number of servers);
//   7. the only server of a one-server table.
// Several servers matching one rule is a ConfigError unless the engine's
// index (rule 6) names one of them: servers sharing an address (pods of one
// node) are told apart by it. None matching any rule on a multi-server table
// is a ConfigError; there is no "first server" fallback. Sources of the
// engines' variables: srun(1) of Slurm 22.05 ("SLURM_NODEID: the relative
// node ID of the current node"); Open MPI's "Environment variables set for
// MPI applications" (docs.open-mpi.org, v5.0; 4.1.4 sets them alike);
// Volcano's env and svc plugin guides (docs/user-guide/how_to_use_env_plugin.md,
// how_to_use_svc_plugin.md).
// IP literals compare as addresses ("::1" == "0:0::1", zone suffix ignored,
// IPv4-mapped IPv6 as IPv4); host names exactly, or one as the short name
// (before the first '.') of the other. Empty variables count as unset.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "davincirun/environment.hpp"
#include "davincirun/rank_table.hpp"

namespace davincirun {

/// What this machine is, as the rules see it. Tests build one by hand.
struct MachineIdentity {
  std::vector<std::string> addresses;  ///< interface addresses, IPv4/IPv6 literals
  std::string host_name;               ///< gethostname(); empty when unknown
  /// The interface of each address ("10.0.0.11" -> "eth0"), when known: an
  /// address missing here has no interface name (socket_interface.hpp).
  std::map<std::string, std::string> interfaces;

  /// This machine: every interface's IPv4 and IPv6 address (getifaddrs, up
  /// or down, loopback included, without zone suffix, no duplicates) with
  /// the name of the first interface holding it, and gethostname(). Never throws: when either call fails, that part is
  /// left empty and the rules that need it match nothing (the no-match error shows it empty).
  static MachineIdentity current();
};

/// The server found and why, for the launcher's log.
struct ServerMatch {
  std::size_t index = 0;  ///< into table.servers
  std::string reason;     ///< e.g. "server_id 10.0.0.11 matches an address of this machine"
  /// The address of this machine (from MachineIdentity::addresses) the match
  /// rests on, when a rule matched an interface address (rules 3 and 5);
  /// empty when it rests on anything else (a variable, a name, an index).
  std::string local_address;
};

/// Applies the rules above. `env` is the launcher's environment. Throws
/// OptionError (option "server_id") when `explicit_server_id` names no
/// server (listing them), when several servers match one rule (naming the
/// rule and each server's matching value), or when nothing matches a
/// multi-server table (listing each rule with the values it looked at).
ServerMatch identify_server(const RankTable& table, const Environment& env, const MachineIdentity& machine,
                            const std::optional<std::string>& explicit_server_id);

/// This machine's part of the table.
struct LocalServer {
  std::size_t index = 0;  ///< into table.servers
  std::string reason;     ///< as ServerMatch::reason
  /// table.servers[index], narrowed to this pod's devices (and rank_start)
  /// when pods of a 0.1 table share the server.
  RankTableServer server;
  std::string local_address;  ///< as ServerMatch::local_address
};

/// identify_server(), then the pod: in a 0.1 table two pods (containers) on
/// one host share a server_id, which the parser merges into one server, and
/// each pod starts only its own devices, found by its pod name
/// (MA_CURRENT_INSTANCE_NAME, else BATCH_TASK_CURRENT_INSTANCE, as
/// ModelArts sets them). Throws OptionError as identify_server() does, and
/// ConfigError when the server holds several pods and neither variable names
/// one of them.
LocalServer find_local_server(const RankTable& table, const Environment& env, const MachineIdentity& machine,
                              const std::optional<std::string>& explicit_server_id);

}  // namespace davincirun
