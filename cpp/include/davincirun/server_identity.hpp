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
//   5. server_id against the interface addresses and the host name;
//   6. the only server of a one-server table.
// Several servers matching one rule, or none matching any rule on a
// multi-server table, is a ConfigError; there is no "first server" fallback.
// IP literals compare as addresses ("::1" == "0:0::1", zone suffix ignored,
// IPv4-mapped IPv6 as IPv4); host names exactly, or one as the short name
// (before the first '.') of the other. Empty variables count as unset.
#pragma once

#include <cstddef>
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

  /// This machine: every interface's IPv4 and IPv6 address (getifaddrs, up
  /// or down, loopback included, without zone suffix, no duplicates) and
  /// gethostname(). Never throws: when either call fails, that part is left
  /// empty and the rules that need it match nothing (the no-match error
  /// shows it empty).
  static MachineIdentity current();
};

/// The server found and why, for the launcher's log.
struct ServerMatch {
  std::size_t index = 0;  ///< into table.servers
  std::string reason;     ///< e.g. "server_id 10.0.0.11 matches an address of this machine"
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
