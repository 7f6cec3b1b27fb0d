// The interface of the address that makes this machine its server
// (rules: socket_interface.hpp).
#include "davincirun/socket_interface.hpp"

#include <utility>

#include <fmt/format.h>

#include "common/ip_address.hpp"

namespace davincirun {

std::optional<SocketInterface> socket_interface(const RankTableServer& server, const std::string& local_address,
                                                const MachineIdentity& machine) {
  auto on_interface = [&](const std::string& address, std::string why) -> std::optional<SocketInterface> {
    const auto it = machine.interfaces.find(address);
    if (it == machine.interfaces.end()) return std::nullopt;
    return SocketInterface{it->second, address, fmt::format("{} is an address of {}", why, it->second)};
  };
  if (!local_address.empty()) return on_interface(local_address, local_address);

  std::pair<const char*, std::optional<std::string>> fields[] = {
      {"container_ip", server.container_ip}, {"host_ip", server.host_ip}, {"server_id", server.server_id}};
  for (const auto& [field, value] : fields) {
    if (!value || !detail::canonical_ip(*value)) continue;
    for (const auto& address : machine.addresses) {
      if (detail::address_key(address) != detail::address_key(*value)) continue;
      if (auto found = on_interface(address, fmt::format("{} {}", field, *value))) return found;
    }
  }
  return std::nullopt;
}

}  // namespace davincirun
