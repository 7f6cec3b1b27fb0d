#include "plan/plan_tables.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "davincirun/errors.hpp"

namespace davincirun::detail {

namespace {

using Json = nlohmann::ordered_json;

}  // namespace

RankTable one_server_table(const std::vector<int>& devices, const std::string& source) {
  Json server;
  server["server_id"] = "127.0.0.1";
  server["device"] = Json::array();
  for (std::size_t i = 0; i < devices.size(); ++i) {
    server["device"].push_back({{"device_id", std::to_string(devices[i])}, {"rank_id", std::to_string(i)}});
  }
  Json table;
  table["version"] = "1.0";
  table["server_count"] = "1";
  table["server_list"] = Json::array({server});
  table["status"] = "completed";
  return parse_rank_table(table.dump(), source);
}

RankTable narrowed_table(const RankTable& table, const std::vector<int>& devices, const std::string& source) {
  if (table.servers.size() != 1) {
    throw OptionError("devices", fmt::format("devices {} narrows a one-server rank table, and this one lists {} "
                                             "servers: leave devices out, or give each server a table of its own",
                                             fmt::join(devices, ","), table.servers.size()));
  }
  const auto& listed = table.servers.front().devices;
  for (const int d : devices) {
    const bool found =
        std::any_of(listed.begin(), listed.end(), [d](const RankTableDevice& x) { return x.device_id == d; });
    if (!found) {
      std::vector<int> ids;
      for (const auto& x : listed) ids.push_back(x.device_id);
      throw OptionError("devices", fmt::format("devices: device {} is not in the rank table, whose server lists "
                                               "devices {}",
                                               d, fmt::join(ids, ",")));
    }
  }
  // The normalized text keeps every field the platform wrote; only the
  // devices (2.0: ranks) and their rank ids change.
  Json json = Json::parse(table.normalized_json);
  const bool v2 = table.format == RankTableFormat::v2_0;
  Json& listed_json = v2 ? json["rank_list"] : json["server_list"][0]["device"];
  Json kept = Json::array();
  int next_rank = 0;
  for (const Json& device : listed_json) {
    // Normalized: 2.0 integers are JSON integers, 1.x ones decimal strings.
    const Json& device_id = device["device_id"];
    const int id = v2 ? device_id.get<int>() : std::stoi(device_id.get<std::string>());
    if (std::find(devices.begin(), devices.end(), id) == devices.end()) continue;
    Json copy = device;
    copy["rank_id"] = v2 ? Json(next_rank) : Json(std::to_string(next_rank));
    ++next_rank;
    kept.push_back(std::move(copy));
  }
  listed_json = std::move(kept);
  if (v2) json["rank_count"] = next_rank;
  RankTable narrowed = parse_rank_table(json.dump(), source);
  narrowed.warnings.insert(narrowed.warnings.begin(), table.warnings.begin(), table.warnings.end());
  return narrowed;
}

}  // namespace davincirun::detail
