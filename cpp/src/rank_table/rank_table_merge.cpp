// merge_rank_tables: the tables of several servers as one, ranks renumbered
// in argument order (rules: rank_table_merge.hpp); 1.0 (and converted 0.1)
// tables into a 1.0 table, 2.0 tables into a 2.0 table.
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
// converted 0.1 table, whose document differs, and for a 2.0 table, whose
// servers the parser made; `where` names it either way.
struct Spot {
  std::size_t input = 0;
  std::size_t server = 0;
  std::optional<std::size_t> device;
};

class Merger {
 public:
  explicit Merger(const std::vector<Input>& inputs) : inputs_(inputs) {}

  std::optional<std::string> pointer(const Spot& spot, std::string_view field) const {
    const RankTableFormat format = inputs_[spot.input].table.format;
    if (format == RankTableFormat::v0_1 || format == RankTableFormat::v2_0) return std::nullopt;
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

// A 2.0 input's ranks, as normalized (unknown fields kept), in its file order,
// their ranks moved up by `offset`.
void append_ranks(const Input& input, int offset, Json& ranks) {
  Json doc = Json::parse(input.table.normalized_json);
  for (Json& rank : doc["rank_list"]) {
    rank["rank_id"] = offset + rank["rank_id"].get<int>();  // normalized: an integer
    ranks.push_back(std::move(rank));
  }
}

// 2.0 has no server_list to merge into: a merged table holds one format.
void check_one_format(const std::vector<Input>& read) {
  const auto is_v2 = [](const Input& input) { return input.table.format == RankTableFormat::v2_0; };
  const Input& first = read.front();
  for (const Input& input : read) {
    if (is_v2(input) == is_v2(first)) continue;
    const bool versioned = input.table.format != RankTableFormat::v0_1;
    throw RankTableError(Kind::unsupported, input.file,
                         versioned ? std::optional<std::string>("/version") : std::nullopt,
                         fmt::format("a format {} table cannot be merged with {}, a format {} table: 2.0 tables "
                                     "merge only with 2.0 tables",
                                     to_string(input.table.format), first.file, to_string(first.table.format)));
  }
}

// 2.0 ranks are grouped into servers by host_ip when they have one, else by
// their net_layer 0: a merged table must be grouped one way.
void check_one_grouping(const std::vector<Input>& read) {
  const auto by_host = [](const Input& input) { return input.table.servers.front().host_ip.has_value(); };
  const Input& first = read.front();
  for (const Input& input : read) {
    if (by_host(input) == by_host(first)) continue;
    const Input& with = by_host(input) ? input : first;
    const Input& without = by_host(input) ? first : input;
    throw RankTableError(Kind::inconsistent, input.file, std::nullopt,
                         fmt::format("the ranks of {} have a host_ip and those of {} do not: a merged table groups "
                                     "its ranks into servers one way, so give every rank a host_ip or none",
                                     with.file, without.file));
  }
}

// One 2.0 table of the inputs' ranks, the first input's other top-level
// fields (topo_file_path...) kept.
std::string merged_v2(const std::vector<Input>& read) {
  Json ranks = Json::array();
  int offset = 0;
  for (const Input& input : read) {
    append_ranks(input, offset, ranks);
    offset += input.table.world_size;
  }
  Json doc = Json::parse(read.front().table.normalized_json);
  doc["status"] = "completed";
  doc["rank_count"] = offset;
  doc["rank_list"] = std::move(ranks);
  return doc.dump(2, ' ', false, Json::error_handler_t::replace);
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
  check_one_format(read);
  const bool v2 = read.front().table.format == RankTableFormat::v2_0;
  if (v2) check_one_grouping(read);
  const Merger merger(read);
  merger.check_unique();
  // 2.0 ranks reach each other through the addresses of their level_list.
  if (server_count > 1 && !v2) merger.check_device_ips();
  if (v2) return parse_rank_table(merged_v2(read), source);

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
