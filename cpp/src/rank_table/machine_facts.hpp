// What this machine shows of its NPUs and of itself, read to write its own
// rank table (machine_rank_table.hpp): the NPU addresses of hccn.conf, the
// interface of the default route, the interfaces' addresses.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace davincirun::detail {

/// The `address_<N>=<ip>` lines of an hccn.conf text: device N -> its
/// address. hccn_tool writes one per NPU when its IP is set, beside
/// netmask_<N>, gateway_<N>, netdetect_<N>... (Ascend's "configure the NPU
/// IP" steps, linked from MindSpore's utils/hccl_tools/README.md:
/// support.huaweicloud.com/instg-9000-A800_9000_9010/atlastrain_03_0049.html).
/// Blank lines, '#' comments and other keys are skipped; spaces around the
/// key and the value do not count. Throws ConfigError "<source>:<line>: ..."
/// for an address line that is not address_<digits>=<IP literal>, a device
/// given twice, or one address given to two devices (naming both lines).
std::map<int, std::string> parse_hccn_conf(std::string_view text, const std::string& source);

/// parse_hccn_conf of the file at `path`; nullopt when it does not exist.
/// Throws ConfigError when it cannot be read, or as parse_hccn_conf.
std::optional<std::map<int, std::string>> read_hccn_conf(const std::string& path);

/// An IPv4 address of one of this machine's interfaces.
struct InterfaceAddress {
  std::string interface;  ///< e.g. "eth0"
  std::string address;    ///< e.g. "10.0.0.11"
};

/// This machine's IPv4 addresses (getifaddrs(3)) on interfaces that are up,
/// loopback (127/8) and link-local (169.254/16) ones left out, in the
/// kernel's order.
std::vector<InterfaceAddress> interface_addresses();

/// The interface of the default IPv4 route in a /proc/net/route text (rows
/// "Iface Destination Gateway Flags RefCnt Use Metric Mask ...", addresses in
/// hex, as Linux's fib_route_seq_show prints them): of the routes to
/// 0.0.0.0/0 that are up (flag 0x1), the one of lowest metric, the first
/// among equals; nullopt when there is none.
std::optional<std::string> default_route_interface(std::string_view proc_net_route);

/// The text of /proc/net/route, or "" when it cannot be read.
std::string read_proc_net_route();

/// A server_id chosen for this machine, and why (for messages).
struct ChosenAddress {
  std::string address;
  std::string reason;  ///< e.g. "the address of eth0, the interface of the default route"
};

/// The address other machines reach this one by, as far as it can tell: the
/// first address of the default route's interface, else (no default route,
/// or it has no IPv4 address) the first of `addresses`; nullopt when there
/// is none.
std::optional<ChosenAddress> choose_server_address(const std::vector<InterfaceAddress>& addresses,
                                                   const std::optional<std::string>& default_interface);

}  // namespace davincirun::detail
