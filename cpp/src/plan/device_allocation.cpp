#include "davincirun/device_allocation.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "davincirun/errors.hpp"

namespace davincirun {

std::vector<int> parse_visible_devices(const std::string& value) {
  std::vector<int> ids;
  std::size_t pos = 0;
  while (pos <= value.size()) {
    std::size_t comma = value.find(',', pos);
    if (comma == std::string::npos) comma = value.size();
    const std::string item = value.substr(pos, comma - pos);
    if (item.empty() || item.size() > 6 ||
        !std::all_of(item.begin(), item.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      throw ConfigError(fmt::format("ASCEND_RT_VISIBLE_DEVICES='{}': '{}' is not a device id", value, item));
    }
    const int id = std::atoi(item.c_str());
    if (!ids.empty() && id <= ids.back()) {
      throw ConfigError(
          fmt::format("ASCEND_RT_VISIBLE_DEVICES='{}': ids must be in ascending order without repeats", value));
    }
    ids.push_back(id);
    pos = comma + 1;
  }
  return ids;
}

std::vector<RankAssignment> allocate_ranks(const RankTable& table, std::size_t server_index,
                                           const std::vector<int>& present,
                                           const std::optional<std::vector<int>>& rt_visible) {
  return allocate_ranks(table.servers.at(server_index), present, rt_visible);
}

std::vector<RankAssignment> allocate_ranks(const RankTableServer& server, const std::vector<int>& present,
                                           const std::optional<std::vector<int>>& rt_visible) {
  // The numbering the device runtime uses here: /dev/davinciN present on this
  // machine (a container sees only its own), else the server's table ids.
  std::vector<int> numbering = present;
  if (numbering.empty()) {
    for (const auto& d : server.devices) numbering.push_back(d.device_id);
    std::sort(numbering.begin(), numbering.end());
  }
  std::vector<RankAssignment> out;
  out.reserve(server.devices.size());
  for (const auto& d : server.devices) {
    auto it = std::lower_bound(numbering.begin(), numbering.end(), d.device_id);
    if (it == numbering.end() || *it != d.device_id) {
      throw ConfigError(
          fmt::format("server {}: device {} (rank {}) is not present on this machine (/dev/davinciN found: {})",
                      server.server_id, d.device_id, d.rank_id, fmt::join(present, ", ")));
    }
    RankAssignment a;
    a.rank = d.rank_id;
    a.local_rank = d.rank_id - server.rank_start;
    a.physical_device_id = d.device_id;
    a.logical_device_id = static_cast<int>(it - numbering.begin());
    if (rt_visible) {
      // The runtime renumbers the devices it is allowed to see from 0.
      auto vis = std::find(rt_visible->begin(), rt_visible->end(), a.logical_device_id);
      if (vis == rt_visible->end()) {
        throw ConfigError(
            fmt::format("server {}: device {} (rank {}, logical id {}) is not in ASCEND_RT_VISIBLE_DEVICES",
                        server.server_id, d.device_id, d.rank_id, a.logical_device_id));
      }
      a.logical_device_id = static_cast<int>(vis - rt_visible->begin());
    }
    a.device_ip = d.device_ip;
    out.push_back(a);
  }
  std::sort(out.begin(), out.end(), [](const RankAssignment& x, const RankAssignment& y) { return x.rank < y.rank; });
  return out;
}

}  // namespace davincirun
