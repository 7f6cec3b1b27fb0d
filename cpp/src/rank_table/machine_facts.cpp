#include "rank_table/machine_facts.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "common/ip_address.hpp"
#include "davincirun/errors.hpp"

namespace davincirun::detail {

namespace {

constexpr std::string_view address_prefix = "address_";

std::string_view trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

bool all_digits(std::string_view text) {
  return !text.empty() && text.size() <= 6 && text.find_first_not_of("0123456789") == std::string_view::npos;
}

}  // namespace

std::map<int, std::string> parse_hccn_conf(std::string_view text, const std::string& source) {
  std::map<int, std::string> addresses;
  std::map<int, std::size_t> line_of_device;
  std::map<std::string, std::pair<int, std::size_t>> device_of_address;
  std::size_t number = 0;
  for (std::size_t start = 0; start < text.size(); ++number) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = trimmed(text.substr(start, end - start));
    start = end + 1;
    if (line.substr(0, address_prefix.size()) != address_prefix) continue;  // blank, comment, netmask_N...
    const auto at = [&](const std::string& what) {
      return ConfigError(fmt::format("{}:{}: {}", source, number + 1, what));
    };
    const std::size_t equals = line.find('=');
    const std::string_view key = trimmed(line.substr(0, equals));
    const std::string_view digits = key.substr(address_prefix.size());
    if (equals == std::string_view::npos || !all_digits(digits)) {
      throw at(fmt::format("expected address_<device>=<IP address>, got '{}'", line));
    }
    const int device = std::stoi(std::string(digits));
    const std::string value(trimmed(line.substr(equals + 1)));
    const auto canonical = canonical_ip(value);
    if (!canonical || value.find('%') != std::string::npos) {
      throw at(fmt::format("the address of device {} is not an IP address: '{}'", device, value));
    }
    if (const auto [it, added] = line_of_device.emplace(device, number + 1); !added) {
      throw at(fmt::format("device {} is given an address twice (also on line {})", device, it->second));
    }
    if (const auto [it, added] = device_of_address.emplace(*canonical, std::pair{device, number + 1}); !added) {
      throw at(fmt::format("address {} is given to devices {} (line {}) and {}", value, it->second.first,
                           it->second.second, device));
    }
    addresses.emplace(device, value);
  }
  return addresses;
}

std::optional<std::map<int, std::string>> read_hccn_conf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    if (error == ENOENT) return std::nullopt;
    throw ConfigError(fmt::format("cannot read {}: {}", path, std::strerror(error)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse_hccn_conf(text.str(), path);
}

std::vector<InterfaceAddress> interface_addresses() {
  std::vector<InterfaceAddress> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (const ifaddrs* p = list; p; p = p->ifa_next) {
    if (!p->ifa_addr || p->ifa_addr->sa_family != AF_INET) continue;
    if (!(p->ifa_flags & IFF_UP) || (p->ifa_flags & IFF_LOOPBACK)) continue;
    const in_addr address = reinterpret_cast<const sockaddr_in*>(p->ifa_addr)->sin_addr;
    const std::uint32_t host_order = ntohl(address.s_addr);
    if ((host_order >> 24) == 127 || (host_order >> 16) == 0xA9FE) continue;  // 127/8, 169.254/16
    char text[INET_ADDRSTRLEN];
    if (!::inet_ntop(AF_INET, &address, text, sizeof text)) continue;
    out.push_back({p->ifa_name, text});
  }
  ::freeifaddrs(list);
  return out;
}

std::optional<std::string> default_route_interface(std::string_view proc_net_route) {
  std::optional<std::string> best;
  long best_metric = 0;
  std::istringstream lines{std::string(proc_net_route)};
  std::string line;
  std::getline(lines, line);  // the header
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string name, destination, gateway, flags, refcnt, use, mask;
    long metric = 0;
    if (!(fields >> name >> destination >> gateway >> flags >> refcnt >> use >> metric >> mask)) continue;
    const bool up = (std::strtoul(flags.c_str(), nullptr, 16) & 0x1) != 0;  // RTF_UP
    if (!up || destination != "00000000" || mask != "00000000") continue;
    if (!best || metric < best_metric) {
      best = name;
      best_metric = metric;
    }
  }
  return best;
}

std::string read_proc_net_route() {
  std::ifstream in("/proc/net/route");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::optional<ChosenAddress> choose_server_address(const std::vector<InterfaceAddress>& addresses,
                                                   const std::optional<std::string>& default_interface) {
  if (default_interface) {
    for (const auto& a : addresses) {
      if (a.interface == *default_interface) {
        return ChosenAddress{a.address,
                             fmt::format("the address of {}, the interface of the default route", a.interface)};
      }
    }
  }
  if (addresses.empty()) return std::nullopt;
  const auto& first = addresses.front();
  return ChosenAddress{
      first.address, fmt::format("the first IPv4 address of this machine ({}; {})", first.interface,
                                 default_interface ? "the default route's interface " + *default_interface + " has none"
                                                   : std::string("no default route"))};
}

}  // namespace davincirun::detail
