// merge_rank_tables: the tables of several servers as one, ranks renumbered
// in argument order (rules: rank_table_merge.hpp).
#include "davincirun/rank_table_merge.hpp"

#include <algorithm>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "common/ip_address.hpp"
#include "davincirun/errors.hpp"
#include "rank_table/rank_table_checker.hpp"

namespace davincirun {

namespace {

using detail::Json;
using Kind = RankTableError::Kind;

struct Input {
  std::string file;
  RankTable table;
};

// Where a server or device of an input is, for messages: its JSON Pointer in
// a 1.x file (servers and devices are in file order there), nullopt for a
// converted 0.1 table, whose document differs; `what` names it either way.
struct Spot {
  std::size_t input = 0;
  std::size_t server = 0;
  std::optional<std::size_t> device;
};

class Merger {
 public:
  explicit Merger(const std::vector<Input>& inputs) : inputs_(inputs) {}

  std::optional<std::string> pointer(const Spot& spot, std::string_view field) const {
    if (inputs_[spot.input].table.format == RankTableFormat::v0_1) return std::nullopt;
    std::string at = detail::child("/server_list", spot.server);
    if (spot.device) at = detail::child(detail::child(at, "device"), *spot.device);
    return detail::child(at, field);
  }

  // "a.json (/server_list/0/server_id)", or "a.json (server 10.0.0.1, device 3)" for a 0.1 table.
  std::string where(const Spot& spot, std::string_view field) const {
    if (const auto at = pointer(spot, field)) return fmt::format("{} ({})", inputs_[spot.input].file, *at);
    const RankTableServer& server = inputs_[spot.input].table.servers[spot.server];
    if (!spot.device) return fmt::format("{} (server {})", inputs_[spot.input].file, server.server_id);
    return fmt::format("{} (server {}, device {})", inputs_[spot.input].file, server.server_id,
                       server.devices[*spot.device].device_id);
  }

  [[noreturn]] void fail(Kind kind, const Spot& spot, std::string_view field, std::string detail) const {
    throw RankTableError(kind, inputs_[spot.input].file, pointer(spot, field), std::move(detail));
  }

  // A server or device_ip in two inputs (one input's own repeats were refused when it was read).
  void check_unique() const {
    std::unordered_map<std::string, Spot> servers;
    std::unordered_map<std::string, Spot> ips;
    for (std::size_t k = 0; k < inputs_.size(); ++k) {
      const auto& list = inputs_[k].table.servers;
      for (std::size_t i = 0; i < list.size(); ++i) {
        const Spot here{k, i, std::nullopt};
        const auto [first, added] = servers.emplace(detail::address_key(list[i].server_id), here);
        if (!added) {
          fail(Kind::duplicate, here, "server_id",
               fmt::format("server {} is also in {}: each server's table can be merged once", list[i].server_id,
                           where(first->second, "server_id")));
        }
        for (std::size_t j = 0; j < list[i].devices.size(); ++j) {
          const auto& ip = list[i].devices[j].device_ip;
          if (!ip) continue;
          const Spot device{k, i, j};
          const auto [other, new_ip] = ips.emplace(detail::address_key(*ip), device);
          if (!new_ip) {
            fail(Kind::duplicate, device, "device_ip",
                 fmt::format("device_ip \"{}\" is also in {}", *ip, where(other->second, "device_ip")));
          }
        }
      }
    }
  }

  // Ranks on different servers reach each other through the device IPs.
  void check_device_ips() const {
    for (std::size_t k = 0; k < inputs_.size(); ++k) {
      const auto& list = inputs_[k].table.servers;
      for (std::size_t i = 0; i < list.size(); ++i) {
        for (std::size_t j = 0; j < list[i].devices.size(); ++j) {
          if (list[i].devices[j].device_ip) continue;
          fail(Kind::missing, {k, i, j}, "device_ip",
               fmt::format("server {}, device {} has no device_ip, which a table of several servers needs; give "
                           "the NPU its address (hccn_tool) and write this server's table again",
                           list[i].server_id, list[i].devices[j].device_id));
        }
      }
    }
  }

 private:
  const std::vector<Input>& inputs_;
};

// An input's servers, as normalized (unknown fields kept), in its rank order,
// their ranks numbered from `next_rank` on.
void append_servers(const Input& input, int& next_rank, Json& servers) {
  Json doc = Json::parse(input.table.normalized_json);
  Json& list = doc["server_list"];
  const auto& table_servers = input.table.servers;
  std::vector<std::size_t> order(table_servers.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return table_servers[a].rank_start < table_servers[b].rank_start; });
  for (const std::size_t i : order) {
    // The normalized copy lists servers and devices as the table does.
    Json& server = list[i];
    const RankTableServer& read = table_servers[i];
    for (std::size_t j = 0; j < read.devices.size(); ++j) {
      server["device"][j]["rank_id"] = std::to_string(next_rank + read.devices[j].rank_id - read.rank_start);
    }
    next_rank += static_cast<int>(read.devices.size());
    servers.push_back(std::move(server));
  }
}

}  // namespace

RankTable merge_rank_tables(const std::vector<std::string>& inputs, const std::string& source) {
  if (inputs.empty()) throw std::invalid_argument("merge_rank_tables: no rank table to merge");
  std::vector<Input> read;
  read.reserve(inputs.size());
  std::size_t server_count = 0;
  for (const std::string& file : inputs) {
    RankTable table = load_rank_table(file);
    if (table.status != "completed") {
      throw RankTableError(Kind::bad_value, file, std::string("/status"),
                           fmt::format("its status is '{}', not 'completed': the table is not finished", table.status));
    }
    if (table.format == RankTableFormat::v1_2) {
      throw RankTableError(Kind::unsupported, file, std::string("/version"),
                           "merging format 1.2 (SuperPoD) tables is not supported: their super_device_ids and "
                           "super_pod_list cannot be combined by rank alone");
    }
    server_count += table.servers.size();
    read.push_back({file, std::move(table)});
  }
  const Merger merger(read);
  merger.check_unique();
  if (server_count > 1) merger.check_device_ips();

  Json servers = Json::array();
  int next_rank = 0;
  for (const Input& input : read) append_servers(input, next_rank, servers);
  Json doc = Json::object();
  doc["version"] = "1.0";
  doc["server_count"] = std::to_string(server_count);
  doc["server_list"] = std::move(servers);
  doc["status"] = "completed";
  // Strings are valid UTF-8 (the parser refused anything else); replace is a guard.
  return parse_rank_table(doc.dump(2, ' ', false, Json::error_handler_t::replace), source);
}

}  // namespace davincirun
