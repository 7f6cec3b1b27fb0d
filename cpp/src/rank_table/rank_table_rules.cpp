// Rank table parser: message helpers, uniqueness (precedence 3) and table-wide
// rules (precedence 4), shared by every format. Pointers come from the
// checker's Origins, so that a converted 0.1 table is reported in its own terms.
#include <algorithm>

#include <fmt/format.h>

#include "common/ip_address.hpp"
#include "rank_table/rank_table_checker.hpp"

namespace davincirun::detail {

namespace {

constexpr std::size_t max_shown_bytes = 80;  // longer strings are shortened in messages

// Calls fn(i, j, device) for each device j of each server i, in table order.
template <typename Fn>
void for_each_device(const RankTable& table, Fn&& fn) {
  for (std::size_t i = 0; i < table.servers.size(); ++i) {
    const auto& devices = table.servers[i].devices;
    for (std::size_t j = 0; j < devices.size(); ++j) fn(i, j, devices[j]);
  }
}

// "3", "3 and 4", "3, 4 and 7"; long lists end with "and N more".
std::string list_numbers(const std::vector<int>& numbers) {
  constexpr std::size_t shown = 8;
  std::string out;
  for (std::size_t i = 0; i < numbers.size() && i < shown; ++i) {
    if (i > 0) out += (i + 1 == numbers.size()) ? " and " : ", ";
    out += std::to_string(numbers[i]);
  }
  if (numbers.size() > shown) out += fmt::format(" and {} more", numbers.size() - shown);
  return out;
}

}  // namespace

std::string shorten(std::string_view text) {
  if (text.size() <= max_shown_bytes) return std::string(text);
  std::size_t cut = max_shown_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

// Containers are named by kind only: dumping them would flood the message, and
// dump() recurses, which hostile nesting could exploit.
std::string describe(const Json& value) {
  if (value.is_object()) return "an object";
  if (value.is_array()) return "an array";
  if (!value.is_string()) return value.dump();
  return Json(shorten(value.get_ref<const std::string&>())).dump(-1, ' ', false, Json::error_handler_t::replace);
}

// RFC 6901: "~" and "/" inside a reference token are written "~0" and "~1".
std::string child(const std::string& pointer, std::string_view key) {
  std::string out = pointer + '/';
  for (const char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

std::string child(const std::string& pointer, std::size_t index) { return pointer + '/' + std::to_string(index); }

// Each duplicate is reported at its second occurrence, naming the first.
void Checker::check_unique(const RankTable& table) const {
  const auto at = [&](std::size_t i, std::size_t j, std::string_view field) {
    return child(origins_.devices[i][j], field);
  };
  // Compared as addresses, as the search for this machine's server compares
  // them: "10.0.0.1" and "::ffff:10.0.0.1" are one machine.
  FirstSeen<std::string> server_ids;
  for (std::size_t i = 0; i < table.servers.size(); ++i) {
    const std::string& id = table.servers[i].server_id;
    const std::string pointer = child(origins_.servers[i], "server_id");
    if (const auto first = server_ids.repeat(address_key(id), pointer)) {
      fail(Kind::duplicate, pointer, fmt::format("server {} listed twice (also at {})", id, *first));
    }
  }
  for (std::size_t i = 0; i < table.servers.size(); ++i) {
    FirstSeen<int> device_ids;
    const auto& server = table.servers[i];
    for (std::size_t j = 0; j < server.devices.size(); ++j) {
      const int id = server.devices[j].device_id;
      if (const auto first = device_ids.repeat(id, at(i, j, "device_id"))) {
        // Two pods of one host: say which, since the file lists them apart.
        const std::string also = format_ == RankTableFormat::v0_1 ? " (also at " + *first + ")" : "";
        fail(Kind::duplicate, at(i, j, "device_id"),
             fmt::format("device {} listed twice on server {}{}", id, server.server_id, also));
      }
    }
  }
  FirstSeen<int> ranks;
  for_each_device(table, [&](std::size_t i, std::size_t j, const RankTableDevice& device) {
    if (const auto first = ranks.repeat(device.rank_id, at(i, j, "rank_id"))) {
      fail(Kind::duplicate, at(i, j, "rank_id"),
           fmt::format("rank {} appears twice (also at {})", device.rank_id, *first));
    }
  });
  FirstSeen<std::string> ips;  // compared in normalized form: "fe80::1" is "fe80:0::1"
  for_each_device(table, [&](std::size_t i, std::size_t j, const RankTableDevice& device) {
    if (!device.device_ip) return;
    const std::string pointer = at(i, j, "device_ip");
    if (const auto first = ips.repeat(address_key(*device.device_ip), pointer)) {
      fail(Kind::duplicate, pointer,
           fmt::format("device_ip {} appears twice (also at {})", describe(Json(*device.device_ip)), *first));
    }
  });
}

// Format 1.2: super pod ids, each server in at most one super pod, then
// super_device_id within a super pod (HCCL: "devices have same superDeviceId in
// superPod"); servers listed in no super pod count as one more pod.
void Checker::check_super_pods_unique(const RankTable& table) const {
  FirstSeen<std::string> pod_ids;
  for (std::size_t p = 0; p < table.super_pods.size(); ++p) {
    const std::string& id = table.super_pods[p].super_pod_id;
    const std::string pointer = fmt::format("/super_pod_list/{}/super_pod_id", p);
    if (const auto first = pod_ids.repeat(id, pointer)) {
      fail(Kind::duplicate, pointer, fmt::format("super pod {} listed twice (also at {})", describe(Json(id)), *first));
    }
  }
  FirstSeen<std::string> members;
  std::map<std::string, std::size_t> pod_of_server;
  for (std::size_t p = 0; p < table.super_pods.size(); ++p) {
    const auto& ids = table.super_pods[p].server_ids;
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const std::string pointer = fmt::format("/super_pod_list/{}/server_list/{}/server_id", p, k);
      if (const auto first = members.repeat(ids[k], pointer)) {
        fail(Kind::duplicate, pointer,
             fmt::format("server {} is listed twice in super_pod_list (also at {})", ids[k], *first));
      }
      pod_of_server.emplace(ids[k], p);
    }
  }
  FirstSeen<std::pair<std::size_t, std::int64_t>> super_ids;
  const std::size_t no_pod = table.super_pods.size();
  for_each_device(table, [&](std::size_t i, std::size_t j, const RankTableDevice& device) {
    if (!device.super_device_id) return;
    const auto it = pod_of_server.find(table.servers[i].server_id);
    const std::size_t pod = it == pod_of_server.end() ? no_pod : it->second;
    const std::string pointer = child(origins_.devices[i][j], "super_device_id");
    if (const auto first = super_ids.repeat({pod, *device.super_device_id}, pointer)) {
      fail(Kind::duplicate, pointer,
           fmt::format("super_device_id {} appears twice in one super pod (also at {})", *device.super_device_id,
                       *first));
    }
  });
}

// Ranks are unique by now, so there are world_size of them: they are exactly
// 0..N-1 unless some are >= N, and then as many below N are missing.
void Checker::check_rank_numbering(const RankTable& table) const {
  const int n = table.world_size;
  std::vector<bool> present(static_cast<std::size_t>(n), false);
  std::vector<int> out_of_range;
  for_each_device(table, [&](std::size_t, std::size_t, const RankTableDevice& device) {
    if (device.rank_id < n)
      present[static_cast<std::size_t>(device.rank_id)] = true;
    else
      out_of_range.push_back(device.rank_id);
  });
  if (out_of_range.empty()) return;
  std::vector<int> missing;
  for (int rank = 0; rank < n; ++rank) {
    if (!present[static_cast<std::size_t>(rank)]) missing.push_back(rank);
  }
  std::sort(out_of_range.begin(), out_of_range.end());
  const bool several = missing.size() > 1;
  fail(Kind::inconsistent, std::nullopt,
       fmt::format("rank ids must be exactly 0..{} (one per device); {} {} {} missing and {} {} "
                   "out of range",
                   n - 1, several ? "ranks" : "rank", list_numbers(missing), several ? "are" : "is",
                   list_numbers(out_of_range), several ? "are" : "is"));
}

// HCCL numbers a server's ranks as one block starting at its first rank.
void Checker::check_contiguous_blocks(const RankTable& table) const {
  for (const auto& server : table.servers) {
    std::vector<int> ranks;
    for (const auto& device : server.devices) ranks.push_back(device.rank_id);
    std::sort(ranks.begin(), ranks.end());
    for (std::size_t k = 1; k < ranks.size(); ++k) {
      if (ranks[k] != ranks[k - 1] + 1) {
        fail(Kind::inconsistent, std::nullopt,
             fmt::format("each server's ranks must form one contiguous block (server {} holds {} "
                         "and {} but not {})",
                         server.server_id, ranks[k - 1], ranks[k], ranks[k - 1] + 1));
      }
    }
  }
}

void Checker::check_server_count(const RankTable& table, std::optional<int> server_count) const {
  const std::size_t actual = table.servers.size();
  if (server_count && static_cast<std::size_t>(*server_count) != actual) {
    fail(Kind::inconsistent, "/server_count",
         fmt::format("server_count is {} but server_list has {} {}", *server_count, actual,
                     actual == 1 ? "entry" : "entries"));
  }
}

// Format 1.2 with super_pod_list: HCCL finds each rank's super pod there, so
// the list must name exactly the servers of server_list (each once: see above).
void Checker::check_super_pod_servers(const RankTable& table) const {
  if (table.super_pods.empty()) return;
  std::map<std::string, bool> listed;  // server_id -> named in super_pod_list
  for (const auto& server : table.servers) listed.emplace(server.server_id, false);
  for (std::size_t p = 0; p < table.super_pods.size(); ++p) {
    const auto& ids = table.super_pods[p].server_ids;
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const auto it = listed.find(ids[k]);
      if (it == listed.end()) {
        fail(Kind::inconsistent, fmt::format("/super_pod_list/{}/server_list/{}/server_id", p, k),
             fmt::format("super pod {} lists server {}, which is not in server_list",
                         describe(Json(table.super_pods[p].super_pod_id)), ids[k]));
      }
      it->second = true;
    }
  }
  for (std::size_t i = 0; i < table.servers.size(); ++i) {
    if (!listed[table.servers[i].server_id]) {
      fail(Kind::inconsistent, child(origins_.servers[i], "server_id"),
           fmt::format("server {} is in no super pod of super_pod_list", table.servers[i].server_id));
    }
  }
}

}  // namespace davincirun::detail
