// Rank table parser, format 0.1 ("template 2", ModelArts training jobs): no
// version, no rank ids. Checked in document order with pointers into the
// original file, then converted to 1.0: groups in file order (device_count 0:
// skipped), pods of a group by the number after the last '-' of pod_name,
// devices in file order, ranks numbered in that order; pods sharing a
// server_id become one server.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "rank_table/rank_table_checker.hpp"

namespace davincirun::detail {

namespace {

// device_count "0" (or 0) marks a group without NPUs, e.g. parameter servers.
bool zero_count(const Json& group) {
  const auto it = group.find("device_count");
  if (it == group.end()) return false;
  if (it->is_number_integer()) return it->get<std::int64_t>() == 0;
  if (!it->is_string()) return false;
  const std::string& text = it->get_ref<const std::string&>();
  return !text.empty() && text.find_first_not_of('0') == std::string::npos;
}

// Distinct server ids of the groups that count, read leniently: device_ip is
// required on every device when there are several, which must be known before
// the devices are checked. Each value is checked properly in document order.
std::size_t count_servers(const Json& doc) {
  std::set<std::string> ids;
  const auto groups = doc.find("group_list");
  if (groups == doc.end() || !groups->is_array()) return 0;
  for (const auto& group : *groups) {
    if (!group.is_object() || zero_count(group)) continue;
    const auto pods = group.find("instance_list");
    if (pods == group.end() || !pods->is_array()) continue;
    for (const auto& pod : *pods) {
      const auto id = pod.is_object() ? pod.find("server_id") : pod.end();
      if (id != pod.end() && id->is_string()) ids.insert(id->get<std::string>());
    }
  }
  return ids.size();
}

// "job0a1b2c3d-job-demo-3" -> 3; nullopt without a -<digits> suffix or above max_table_integer.
std::optional<int> pod_number(const std::string& name) {
  const std::size_t dash = name.rfind('-');
  if (dash == std::string::npos) return std::nullopt;
  const std::string digits = name.substr(dash + 1);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  std::int64_t number = 0;
  for (const char digit : digits) {
    number = number * 10 + (digit - '0');
    if (number > max_table_integer) return std::nullopt;
  }
  return static_cast<int>(number);
}

const char* entries(std::size_t n) { return n == 1 ? "entry" : "entries"; }

}  // namespace

RankTable Checker::check_v0(const Json& doc) {
  require(doc, "", {"group_list"});
  multi_server_ = count_servers(doc) > 1;
  std::string status = "completed";
  std::optional<int> group_count;
  std::size_t groups = 0;
  std::vector<V0Pod> pods;
  std::vector<V0CountMismatch> counts;
  for (const auto& [key, value] : doc.get_ref<const Json::object_t&>()) {
    const std::string at = child("", key);
    if (key == "group_count")
      group_count = small_integer(value, at);
    else if (key == "status")
      status = string_value(value, at);
    else if (key == "group_list") {
      expect_array(value, at);
      if (value.empty()) fail(Kind::bad_value, at, "group_list is empty");
      groups = value.size();
      for (std::size_t g = 0; g < groups; ++g) v0_group(value[g], child(at, g), g, pods, counts);
      if (pods.empty()) {
        fail(Kind::bad_value, at, "no devices: every group has device_count 0");
      }
    }
    // Other fields (deploy_mode, chip_info...) are ignored.
  }

  v0_check_pods_unique(pods);
  std::stable_sort(pods.begin(), pods.end(), [](const V0Pod& a, const V0Pod& b) {
    return std::make_pair(a.group, a.number.value_or(0)) < std::make_pair(b.group, b.number.value_or(0));
  });
  RankTable table = v0_convert(pods);
  table.status = status;

  const std::vector<int> ranks = check_unique(table);
  v0_check_adjacent(pods);
  // Both hold by construction once pods are adjacent; kept as a guard.
  check_rank_numbering(table, ranks);
  check_contiguous_blocks(table, ranks);
  if (group_count && static_cast<std::size_t>(*group_count) != groups) {
    fail(Kind::inconsistent, "/group_count",
         fmt::format("group_count is {} but group_list has {} {}", *group_count, groups, entries(groups)));
  }
  v0_check_counts(counts);
  table.normalized_json = normalized_from_v0(table);
  return table;
}

void Checker::v0_group(const Json& value, const std::string& pointer, std::size_t index, std::vector<V0Pod>& pods,
                       std::vector<V0CountMismatch>& counts) {
  expect_object(value, pointer);
  // device_count decides whether the group is read at all, so it comes first.
  std::optional<int> device_count;
  if (const auto it = value.find("device_count"); it != value.end()) {
    device_count = small_integer(*it, child(pointer, "device_count"));
    if (*device_count == 0) return;
  }
  require(value, pointer, {"instance_list"});
  std::optional<int> instance_count;
  const std::size_t first = pods.size();
  for (const auto& [key, field] : value.get_ref<const Json::object_t&>()) {
    const std::string at = child(pointer, key);
    if (key == "instance_count")
      instance_count = small_integer(field, at);
    else if (key == "instance_list") {
      expect_array(field, at);
      if (field.empty()) fail(Kind::bad_value, at, "a group with devices has no instances (pods)");
      for (std::size_t k = 0; k < field.size(); ++k) {
        pods.push_back(v0_pod(field[k], child(at, k), field.size() > 1));
        pods.back().group = index;
      }
    }
  }
  const std::size_t instances = pods.size() - first;
  if (instance_count && static_cast<std::size_t>(*instance_count) != instances) {
    counts.push_back({child(pointer, "instance_count"), fmt::format("instance_count is {} but instance_list has {} {}",
                                                                    *instance_count, instances, entries(instances))});
  }
  std::size_t devices = 0;
  for (std::size_t p = first; p < pods.size(); ++p) devices += pods[p].devices.size();
  if (device_count && static_cast<std::size_t>(*device_count) != devices) {
    counts.push_back(
        {child(pointer, "device_count"), fmt::format("device_count is {} but the group's pods list {} {}",
                                                     *device_count, devices, devices == 1 ? "device" : "devices")});
  }
}

V0Pod Checker::v0_pod(const Json& value, const std::string& pointer, bool numbered) {
  expect_object(value, pointer);
  require(value, pointer, {"pod_name", "server_id", "devices"});
  V0Pod out;
  out.pointer = pointer;
  for (const auto& [key, field] : value.get_ref<const Json::object_t&>()) {
    const std::string at = child(pointer, key);
    if (key == "pod_name") {
      out.pod_name = string_value(field, at);
      if (out.pod_name.empty()) fail(Kind::bad_value, at, "pod_name must not be empty, got \"\"");
      out.number = pod_number(out.pod_name);
      // Only the order of several pods needs the number.
      if (numbered && !out.number) {
        fail(Kind::bad_value, at,
             fmt::format("pod_name {} does not end in -<number> (at most {}), which orders the "
                         "pods of a group and so their ranks",
                         describe(field), max_table_integer));
      }
    } else if (key == "server_id") {
      out.server_id = server_id(field, at);
    } else if (key == "devices") {
      expect_array(field, at);
      if (field.empty()) {
        fail(Kind::bad_value, at, fmt::format("pod at {} has no devices", pointer));
      }
      for (std::size_t d = 0; d < field.size(); ++d) {
        out.devices.push_back(v0_device(field[d], child(at, d)));
      }
    }
    // Other fields (a rank_id some generators add to a pod...) are ignored: ranks follow pod order.
  }
  return out;
}

RankTableDevice Checker::v0_device(const Json& value, const std::string& pointer) {
  expect_object(value, pointer);
  require(value, pointer, {"device_id"});
  require_device_ip_if_multi_server(value, pointer);
  RankTableDevice out;
  for (const auto& [key, field] : value.get_ref<const Json::object_t&>()) {
    const std::string at = child(pointer, key);
    if (key == "device_id")
      out.device_id = small_integer(field, at);
    else if (key == "device_ip")
      out.device_ip = device_ip(field, at);
  }
  return out;
}

// pod_name identifies a pod (the launcher matches it against the platform's
// instance name); its number decides the order within a group.
void Checker::v0_check_pods_unique(const std::vector<V0Pod>& pods) const {
  FirstSeen<std::string> names;
  for (const auto& pod : pods) {
    const std::string at = child(pod.pointer, "pod_name");
    if (const auto first = names.repeat(pod.pod_name, at)) {
      fail(Kind::duplicate, at, fmt::format("pod {} listed twice (also at {})", describe(Json(pod.pod_name)), *first));
    }
  }
  FirstSeen<std::pair<std::size_t, int>> numbers;
  for (const auto& pod : pods) {
    const std::string at = child(pod.pointer, "pod_name");
    if (!pod.number) continue;
    if (const auto first = numbers.repeat({pod.group, *pod.number}, at)) {
      fail(Kind::duplicate, at,
           fmt::format("pod {} has the same number ({}) as the pod at {}, so the order of their "
                       "ranks is ambiguous",
                       describe(Json(pod.pod_name)), *pod.number, *first));
    }
  }
}

// Ranks follow `ordered`; a server is created by its first pod, and later pods
// of the same server_id join it.
RankTable Checker::v0_convert(const std::vector<V0Pod>& ordered) {
  RankTable table;
  std::map<std::string, std::size_t> index;  // server_id -> position in table.servers
  int rank = 0;
  for (const auto& pod : ordered) {
    const auto [it, added] = index.emplace(pod.server_id, table.servers.size());
    if (added) {
      auto& server = table.servers.emplace_back();
      server.server_id = pod.server_id;
      server.rank_start = rank;
      origins_.servers.push_back(pod.pointer);
      origins_.devices.emplace_back();
    }
    auto& server = table.servers[it->second];
    server.pod_names.push_back(pod.pod_name);
    for (std::size_t d = 0; d < pod.devices.size(); ++d) {
      auto& device = server.devices.emplace_back(pod.devices[d]);
      device.rank_id = rank++;
      device.pod_name = pod.pod_name;
      origins_.devices[it->second].push_back(child(child(pod.pointer, "devices"), d));
    }
  }
  table.world_size = rank;
  return table;
}

// HCCL numbers a server's ranks as one block: pods that share a server_id must
// follow each other in rank order.
void Checker::v0_check_adjacent(const std::vector<V0Pod>& ordered) const {
  std::map<std::string, const V0Pod*> first_of_server;
  for (std::size_t p = 0; p < ordered.size(); ++p) {
    const V0Pod& pod = ordered[p];
    const auto [it, added] = first_of_server.emplace(pod.server_id, &pod);
    if (added || ordered[p - 1].server_id == pod.server_id) continue;
    fail(Kind::inconsistent, child(pod.pointer, "server_id"),
         fmt::format("pods {} and {} share server {}, but pod {} comes between them in rank "
                     "order; each server's ranks must form one contiguous block",
                     describe(Json(it->second->pod_name)), describe(Json(pod.pod_name)), pod.server_id,
                     describe(Json(ordered[p - 1].pod_name))));
  }
}

void Checker::v0_check_counts(const std::vector<V0CountMismatch>& counts) const {
  if (!counts.empty()) fail(Kind::inconsistent, counts.front().pointer, counts.front().detail);
}

}  // namespace davincirun::detail
