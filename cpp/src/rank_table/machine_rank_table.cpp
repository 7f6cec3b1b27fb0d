// machine_rank_table: this machine's devices and addresses as a one-server table.
#include "davincirun/machine_rank_table.hpp"

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "davincirun/errors.hpp"
#include "rank_table/machine_facts.hpp"

namespace davincirun {

std::vector<int> present_devices(const std::string& dev_dir) {
  std::vector<int> ids;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(dev_dir.c_str()), ::closedir);
  if (!dir) return ids;
  constexpr std::string_view prefix = "davinci";
  while (const dirent* entry = ::readdir(dir.get())) {
    std::string_view name = entry->d_name;
    // Only davinciN: not davinci_manager, davinci_manager_docker_... etc.
    if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix) continue;
    std::string_view digits = name.substr(prefix.size());
    if (digits.size() > 6 || !std::all_of(digits.begin(), digits.end(),
                                          [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      continue;
    }
    ids.push_back(std::atoi(std::string(digits).c_str()));
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

namespace {

using Json = nlohmann::ordered_json;

// `root` + "/dev", without a doubled slash for "/".
std::string under(const std::string& root, const char* path) {
  if (root.empty() || root == "/") return path;
  return (root.back() == '/' ? root.substr(0, root.size() - 1) : root) + path;
}

std::vector<int> chosen_devices(const MachineRankTableOptions& options, const std::string& dev_dir) {
  std::vector<int> present = present_devices(dev_dir);
  if (present.empty()) {
    throw ConfigError(fmt::format("no NPU on this machine: no {}/davinci<N> (the NPUs' device files)", dev_dir));
  }
  if (!options.devices) return present;
  std::vector<int> devices = *options.devices;
  std::sort(devices.begin(), devices.end());
  for (std::size_t k = 0; k < devices.size(); ++k) {
    if (k > 0 && devices[k] == devices[k - 1]) {
      throw OptionError("devices", fmt::format("devices: device {} is given twice", devices[k]));
    }
    if (!std::binary_search(present.begin(), present.end(), devices[k])) {
      throw OptionError("devices", fmt::format("devices: device {} is not on this machine ({}/davinci<N>: {})",
                                               devices[k], dev_dir, fmt::join(present, ",")));
    }
  }
  if (devices.empty()) throw OptionError("devices", "devices: the list is empty");
  return devices;
}

// The server_id and why.
std::pair<std::string, std::string> server_id_of(const MachineRankTableOptions& options) {
  if (options.server_id) return {*options.server_id, "given"};
  const auto addresses = detail::interface_addresses();
  const auto chosen =
      detail::choose_server_address(addresses, detail::default_route_interface(detail::read_proc_net_route()));
  if (!chosen) {
    throw OptionError("server_id",
                      "this machine has no IPv4 address on an interface that is up (loopback and "
                      "169.254/16 aside) to be its server_id: give ",
                      " (the address or name the other servers know it by)");
  }
  return {chosen->address, chosen->reason};
}

}  // namespace

MachineRankTable machine_rank_table(const MachineRankTableOptions& options) {
  const std::string dev_dir = under(options.system_root, "/dev");
  const std::string hccn_conf = under(options.system_root, "/etc/hccn.conf");
  const std::vector<int> devices = chosen_devices(options, dev_dir);
  const auto addresses = detail::read_hccn_conf(hccn_conf);
  auto [server_id, reason] = server_id_of(options);

  Json list = Json::array();
  std::vector<int> without_ip;
  for (std::size_t rank = 0; rank < devices.size(); ++rank) {
    Json device = Json::object();
    device["device_id"] = std::to_string(devices[rank]);
    std::optional<std::string> ip;
    if (addresses) {
      if (const auto it = addresses->find(devices[rank]); it != addresses->end()) ip = it->second;
    }
    if (ip) {
      device["device_ip"] = *ip;
    } else {
      without_ip.push_back(devices[rank]);
    }
    device["rank_id"] = std::to_string(rank);
    list.push_back(std::move(device));
  }
  Json server = Json::object();
  server["server_id"] = server_id;
  server["device"] = std::move(list);
  server["host_nic_ip"] = "reserve";
  Json doc = Json::object();
  doc["version"] = "1.0";
  doc["server_count"] = "1";
  doc["server_list"] = Json::array({std::move(server)});
  doc["status"] = "completed";

  MachineRankTable out;
  try {
    out.table = parse_rank_table(doc.dump(2), "this machine's rank table");
  } catch (const RankTableError& e) {
    // The devices and addresses were checked above: what is left is server_id.
    throw OptionError("server_id", fmt::format("server_id '{}' cannot be used: {}", server_id, e.detail()));
  }
  out.server_reason = std::move(reason);
  if (!without_ip.empty()) {
    const std::string which = without_ip.size() == 1 ? fmt::format("device {} has", without_ip.front())
                                                     : fmt::format("devices {} have", fmt::join(without_ip, ", "));
    const std::string why = addresses ? fmt::format("{} no address_<N> line in {}", which, hccn_conf)
                                      : fmt::format("there is no {} ({} no address)", hccn_conf, which);
    out.warnings.push_back(fmt::format(
        "{}: listed without device_ip. One server needs none; a table merged with other servers' needs one on every "
        "device, so give the NPUs their addresses (hccn_tool -i <N> -ip -s address ...) and write the table again",
        why));
  }
  return out;
}

}  // namespace davincirun
