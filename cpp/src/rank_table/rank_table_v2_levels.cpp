// Rank table parser, format 2.0: a rank's level_list, the network layers it
// is reached through and its addresses on each, in document order. HCCL
// refuses a table breaking these rules when the ranks start, with a message
// that names no rank; here it is refused before anything starts, with its
// pointer. The rules (HCCL's guide for the Ascend 950 and its reader; links
// in docs/rank-tables.md): at most 8 layers in ascending net_layer 0..7;
// net_instance_id of 1 to 1024 bytes; at most 24 addresses per layer, each an
// addr_type of EID, IPV4 or IPV6 with an addr of that type, and 1 to 16 ports
// of 1 to 32 bytes.
#include <fmt/format.h>

#include "common/ip_address.hpp"
#include "rank_table/rank_table_checker.hpp"

namespace davincirun::detail {

namespace {

constexpr std::size_t max_levels = 8;
constexpr int max_net_layer = 7;
constexpr std::size_t max_instance_id_bytes = 1024;
constexpr std::size_t max_addresses = 24;
constexpr std::size_t max_ports = 16;
constexpr std::size_t max_port_bytes = 32;
constexpr std::size_t max_plane_id_bytes = 1024;
constexpr std::size_t eid_digits = 32;  // a 16-byte EID, as hccn_tool prints it

bool is_eid(std::string_view text) {
  return text.size() == eid_digits && text.find_first_not_of("0123456789abcdefABCDEF") == std::string_view::npos;
}

// Whether `addr` is an address of `type` (checked: "EID", "IPV4" or "IPV6").
bool fits(const std::string& type, const std::string& addr) {
  if (type == "EID") return is_eid(addr);
  return type == "IPV4" ? is_ipv4_literal(addr) : is_ipv6_literal(addr);
}

std::string expected_form(const std::string& type) {
  if (type == "EID") return "32 hexadecimal digits";
  return type == "IPV4" ? "an IPv4 literal" : "an IPv6 literal";
}

}  // namespace

// The net_instance_id of the net_layer 0 entry, when there is one.
std::optional<std::string> Checker::v2_levels(const Json& list, const std::string& pointer) const {
  expect_array(list, pointer);
  if (list.empty()) fail(Kind::bad_value, pointer, "level_list is empty: a rank is reached through one layer at least");
  if (list.size() > max_levels) {
    fail(Kind::bad_value, pointer,
         fmt::format("level_list has {} entries; HCCL reads at most {}", list.size(), max_levels));
  }
  std::optional<std::string> layer0;
  std::optional<int> previous;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string at = child(pointer, i);
    auto [layer, instance] = v2_level(list[i], at);
    if (previous && layer <= *previous) {
      fail(Kind::bad_value, child(at, "net_layer"),
           fmt::format("net_layer {} comes after net_layer {}: level_list lists its layers in ascending net_layer "
                       "order",
                       layer, *previous));
    }
    previous = layer;
    if (layer == 0) layer0 = std::move(instance);
  }
  return layer0;
}

// (net_layer, net_instance_id) of one entry of level_list.
std::pair<int, std::string> Checker::v2_level(const Json& value, const std::string& pointer) const {
  expect_object(value, pointer);
  require(value, pointer, {"net_layer", "net_instance_id", "rank_addr_list"});
  std::pair<int, std::string> out;
  for (const auto& [key, field] : value.get_ref<const Json::object_t&>()) {
    const std::string at = child(pointer, key);
    if (key == "net_layer") {
      out.first = v2_integer(field, at, 0, max_net_layer);
    } else if (key == "net_instance_id") {
      out.second = string_value(field, at);
      if (out.second.empty() || out.second.size() > max_instance_id_bytes) {
        fail(Kind::bad_value, at,
             fmt::format("net_instance_id must be 1 to {} bytes long, got {}", max_instance_id_bytes, describe(field)));
      }
    } else if (key == "net_type" || key == "net_attr") {
      string_value(field, at);  // the values are HCCL's to judge: its list of types grows
    } else if (key == "rank_addr_list") {
      expect_array(field, at);
      if (field.size() > max_addresses) {
        fail(Kind::bad_value, at,
             fmt::format("rank_addr_list has {} addresses; HCCL reads at most {}", field.size(), max_addresses));
      }
      for (std::size_t k = 0; k < field.size(); ++k) v2_address(field[k], child(at, k));
    }
  }
  return out;
}

void Checker::v2_address(const Json& value, const std::string& pointer) const {
  expect_object(value, pointer);
  require(value, pointer, {"addr_type", "addr", "ports"});
  std::string type;
  for (const auto& [key, field] : value.get_ref<const Json::object_t&>()) {
    const std::string at = child(pointer, key);
    if (key == "addr_type") {
      type = string_value(field, at);
      if (type != "EID" && type != "IPV4" && type != "IPV6") {
        fail(Kind::bad_value, at, "addr_type must be \"EID\", \"IPV4\" or \"IPV6\", got " + describe(field));
      }
    } else if (key == "addr") {
      string_value(field, at);  // checked below against addr_type, which may come after it
    } else if (key == "ports") {
      expect_array(field, at);
      if (field.empty() || field.size() > max_ports) {
        fail(Kind::bad_value, at, fmt::format("ports must list 1 to {} ports, got {}", max_ports, field.size()));
      }
      for (std::size_t k = 0; k < field.size(); ++k) {
        const std::string port_at = child(at, k);
        const std::string& port = string_value(field[k], port_at);
        if (port.empty() || port.size() > max_port_bytes) {
          fail(Kind::bad_value, port_at,
               fmt::format("a port (\"<die>/<port>\") is 1 to {} bytes long, got {}", max_port_bytes,
                           describe(field[k])));
        }
      }
    } else if (key == "plane_id") {
      if (string_value(field, at).size() > max_plane_id_bytes) {
        fail(Kind::bad_value, at,
             fmt::format("plane_id is longer than {} bytes: {}", max_plane_id_bytes, describe(field)));
      }
    }
  }
  const Json& addr = *value.find("addr");
  if (!fits(type, addr.get_ref<const std::string&>())) {
    fail(Kind::bad_value, child(pointer, "addr"),
         fmt::format("{} is not an {} address (expected {})", describe(addr), type, expected_form(type)));
  }
}

}  // namespace davincirun::detail
