// Rank table parser, format 2.0 (Ascend 950 generation): "version" "2.0",
// rank_count and a flat rank_list, no servers. Each rank is checked in
// document order (its level_list: rank_table_v2_levels.cpp), then the ranks
// are grouped into the servers a launcher starts: by host_ip when ranks carry
// one, else by the net_instance_id of their net_layer 0 entry, the network
// inside one server. Rules and their sources: docs/rank-tables.md.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "common/ip_address.hpp"
#include "rank_table/rank_table_checker.hpp"

namespace davincirun::detail {

namespace {

constexpr int max_rank_count = 65536;  // HCCL's guide: rank_count 1..65536
constexpr int max_device_id = 64;      // device_id and local_id 0..64
constexpr int spare_local_id = 64;     // the spare NPU, which names the local_id it replaces
constexpr int max_port = 65535;        // device_port, host_port 1..65535

// Whether any rank names its host. Known before the ranks are checked, since
// then every rank must: a table grouped two ways would be ambiguous.
bool any_host_ip(const Json& doc) {
  const auto list = doc.find("rank_list");
  if (list == doc.end() || !list->is_array()) return false;
  return std::any_of(list->begin(), list->end(),
                     [](const Json& rank) { return rank.is_object() && rank.contains("host_ip"); });
}

}  // namespace

RankTable Checker::check_v2(Json doc) {
  require(doc, "", {"rank_count", "rank_list"});
  by_host_ = any_host_ip(doc);
  std::string status = "completed";
  int rank_count = 0;
  std::vector<V2Rank> ranks;
  for (const auto& [key, value] : doc.get_ref<const Json::object_t&>()) {
    const std::string at = child("", key);
    if (key == "rank_count") {
      rank_count = v2_integer(value, at, 1, max_rank_count);
    } else if (key == "status") {
      status = string_value(value, at);
    } else if (key == "rank_list") {
      expect_array(value, at);
      if (value.empty()) fail(Kind::bad_value, at, "rank_list is empty");
      ranks.reserve(value.size());
      for_each_element(value, at, [&](const Json& element, const std::string& pointer) {
        ranks.push_back(v2_rank(element, pointer));
      });
    }
    // "version" is checked above; topo_file_path, detour and the like are kept, not read.
  }
  RankTable table = v2_group(ranks);
  table.status = status;

  const std::vector<int> rank_ids = check_unique(table);
  v2_check_local_ids(table);
  check_rank_numbering(table, rank_ids);
  check_contiguous_blocks(table, rank_ids);
  v2_check_rank_count(table, rank_count);
  table.normalized_json = normalized_v2(std::move(doc), table, text_bytes_ + 64);
  return table;
}

// HCCL's ranges; digits or JSON integers, as every format's integers.
int Checker::v2_integer(const Json& value, const std::string& pointer, int min, int max) const {
  const std::int64_t number = table_integer(value, pointer, max);
  if (number < min) {
    fail(Kind::bad_value, pointer, fmt::format("out of range ({} to {}), got {}", min, max, describe(value)));
  }
  return static_cast<int>(number);
}

V2Rank Checker::v2_rank(const Json& value, const std::string& pointer) {
  expect_object(value, pointer);
  require(value, pointer, {"rank_id", "local_id", "device_id", "level_list"});
  if (by_host_ && !value.contains("host_ip")) {
    fail(Kind::missing, child(pointer, "host_ip"),
         "required field missing: host_ip (other ranks have one, and ranks are grouped into servers by it: "
         "a table of several servers needs every rank's host address)");
  }
  V2Rank out;
  out.pointer = pointer;
  std::optional<std::string> layer0;  // the net_instance_id of its net_layer 0
  bool replaced = false;
  std::string at = pointer;  // one buffer for every field's pointer
  for (const auto& [key, field] : value.get_ref<const Json::object_t&>()) {
    at.resize(pointer.size());
    append_key(at, key);
    if (key == "rank_id") {
      out.device.rank_id = small_integer(field, at);
    } else if (key == "device_id") {
      out.device.device_id = v2_integer(field, at, 0, max_device_id);
    } else if (key == "local_id") {
      out.device.local_id = v2_integer(field, at, 0, max_device_id);
    } else if (key == "replaced_local_id") {
      v2_integer(field, at, 0, spare_local_id - 1);
      replaced = true;
    } else if (key == "device_port" || key == "host_port") {
      v2_integer(field, at, 1, max_port);
    } else if (key == "host_ip") {
      const std::string& ip = string_value(field, at);
      // HCCL reads a plain address: a zone ("%eth0") is refused, not dropped.
      if (!is_ip_address(ip) || ip.find('%') != std::string::npos) {
        fail(Kind::bad_value, at, describe(field) + " is not an IP address (expected an IPv4 or IPv6 literal)");
      }
      out.host_ip = ip;
    } else if (key == "level_list") {
      layer0 = v2_levels(field, at);
    }
  }
  if (out.device.local_id == spare_local_id && !replaced) {
    fail(Kind::missing, child(pointer, "replaced_local_id"),
         "required field missing: replaced_local_id (local_id 64 is the spare NPU, which names the local_id it "
         "replaces)");
  }
  if (out.host_ip) {
    out.server = *out.host_ip;
  } else if (layer0) {
    out.server = std::move(*layer0);
  } else {
    fail(Kind::missing, child(pointer, "level_list"),
         "level_list has no net_layer 0 entry, whose net_instance_id names the rank's server (or give every rank "
         "a host_ip)");
  }
  return out;
}

// Servers in the order their first rank appears; a server's devices in
// rank_list order. Names compare as server ids do (detail::address_key).
RankTable Checker::v2_group(const std::vector<V2Rank>& ranks) {
  RankTable table;
  std::map<std::string, std::size_t> index;  // a server's name -> its position in table.servers
  for (const auto& rank : ranks) {
    const auto [it, added] = index.emplace(address_key(rank.server), table.servers.size());
    if (added) {
      auto& server = table.servers.emplace_back();
      server.server_id = rank.server;
      server.host_ip = rank.host_ip;
      server.rank_start = rank.device.rank_id;
      origins_.servers.push_back(rank.pointer);
      origins_.devices.emplace_back();
    }
    auto& server = table.servers[it->second];
    server.devices.push_back(rank.device);
    server.rank_start = std::min(server.rank_start, rank.device.rank_id);
    origins_.devices[it->second].push_back(rank.pointer);
  }
  table.world_size = static_cast<int>(ranks.size());
  return table;
}

// HCCL's guide: local_id is unique within its server.
void Checker::v2_check_local_ids(const RankTable& table) const {
  for (std::size_t i = 0; i < table.servers.size(); ++i) {
    const auto& devices = table.servers[i].devices;
    std::map<int, std::size_t> first;  // local_id -> its first device
    for (std::size_t j = 0; j < devices.size(); ++j) {
      const int id = devices[j].local_id.value_or(-1);  // always set in 2.0
      const auto [it, added] = first.emplace(id, j);
      if (added) continue;
      fail(Kind::duplicate, child(origins_.device({i, j}), "local_id"),
           fmt::format("local_id {} listed twice on server {} (also at {})", id, table.servers[i].server_id,
                       child(origins_.device({i, it->second}), "local_id")));
    }
  }
}

void Checker::v2_check_rank_count(const RankTable& table, int rank_count) const {
  if (rank_count == table.world_size) return;
  fail(Kind::inconsistent, "/rank_count",
       fmt::format("rank_count is {} but rank_list has {} {}", rank_count, table.world_size,
                   table.world_size == 1 ? "entry" : "entries"));
}

}  // namespace davincirun::detail
