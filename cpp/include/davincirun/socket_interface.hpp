// The network interface the ranks of a multi-server job talk through: the
// one holding the address by which this machine is its server in the rank
// table, so that every framework binds where the other servers reach it.
//
// The variables it fills (environment.hpp; sources in docs/environment.md):
//   GLOO_SOCKET_IFNAME  = <name>     PyTorch's gloo backend (torch/csrc/
//                                    distributed/c10d/init.cpp: a comma-separated
//                                    list of interface names); without it gloo
//                                    binds to the address its host name resolves
//                                    to, else 127.0.0.1
//   NCCL_SOCKET_IFNAME  = =<name>    NCCL ("=" asks for exactly that name, not a prefix)
//   HCCL_SOCKET_IFNAME  = =<name>    HCCL (the same syntax, CANN 8.0 reference)
//   HCCL_IF_IP          = <address>  HCCL; it wins over HCCL_SOCKET_IFNAME
#pragma once

#include <optional>
#include <string>

#include "davincirun/rank_table.hpp"
#include "davincirun/server_identity.hpp"

namespace davincirun {

struct SocketInterface {
  std::string name;     ///< e.g. "eth0"
  std::string address;  ///< this machine's address on it, e.g. "10.0.0.11"
  std::string reason;   ///< e.g. "server_id 10.0.0.11 is an address of eth0"
};

/// The interface to name for `server` (this machine's server, as
/// find_local_server() found it, `local_address` its
/// LocalServer::local_address):
///  1. when the match rests on an interface address, that address;
///  2. otherwise (the server was found by a variable, a name, an index or
///     explicitly) the first of the server's container_ip, host_ip and
///     server_id that is an address of this machine;
/// and the interface holding it (MachineIdentity::interfaces). nullopt when
/// neither gives an address with a known interface: then the table does not
/// say where this machine is reached (e.g. host_ip is the node's address
/// and this is a container with its own), and naming an interface could
/// make the ranks bind where no peer reaches them; the frameworks' own
/// choice stays.
std::optional<SocketInterface> socket_interface(const RankTableServer& server, const std::string& local_address,
                                                const MachineIdentity& machine);

}  // namespace davincirun
