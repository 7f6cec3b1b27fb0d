// Rank table parser: message helpers, uniqueness (precedence 3) and table-wide
// rules (precedence 4), shared by every format. Pointers come from the
// checker's Origins, so that a converted 0.1 table is reported in its own terms.
#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include <fmt/format.h>

#include "common/ip_address.hpp"
#include "common/text.hpp"
#include "common/wide_hash.hpp"
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

// The place of the k-th device (from 0, in table order) of those `counted` accepts.
template <typename Counted>
Place nth_place(const RankTable& table, std::size_t k, Counted counted) {
  std::optional<Place> found;
  for_each_device(table, [&](std::size_t i, std::size_t j, const RankTableDevice& device) {
    if (found || !counted(device)) return;
    if (k-- == 0) found = Place{i, j};
  });
  if (!found) throw std::logic_error("nth_place: fewer devices than the index");
  return *found;
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

// 64-bit hashes of the keys first_repeat compares.
std::uint64_t key_hash(int key) { return static_cast<std::uint64_t>(key); }
std::uint64_t key_hash(const std::string& key) { return wide_hash64(key); }
std::uint64_t key_hash(const std::array<unsigned char, 16>& key) {
  std::uint64_t high = 0, low = 0;  // an IPv4 address is all in `low`
  std::memcpy(&high, key.data(), sizeof high);
  std::memcpy(&low, key.data() + sizeof high, sizeof low);
  // Mixed so that every byte reaches the bits the table's slot comes from:
  // the bytes that vary most (an IPv4 address's last ones) are the top ones.
  std::uint64_t h = high * 0x9E3779B97F4A7C15ULL + low;
  h = (h ^ (h >> 32)) * 0xD6E8FEB86659FD93ULL;
  return h ^ (h >> 32);
}
std::uint64_t key_hash(const std::pair<std::size_t, std::int64_t>& key) {
  return (static_cast<std::uint64_t>(key.first) << 33) ^ static_cast<std::uint64_t>(key.second);  // id < 2^32
}

// Whether every key differs, for numbers below a small bound: one bit each.
// nullopt when a key is out of [0, max(2 * size, 1024)), which a table's
// ranks and device ids seldom are: then the hashes decide.
std::optional<bool> distinct_small(const std::vector<int>& keys) {
  const std::size_t bound = std::max<std::size_t>(keys.size() * 2, 1024);
  std::array<std::uint64_t, 16> few{};  // 1,024 bits: a server's device ids, without allocating
  std::vector<std::uint64_t> many(bound > 1024 ? bound / 64 + 1 : 0);
  std::uint64_t* bits = many.empty() ? few.data() : many.data();
  for (const int key : keys) {
    if (key < 0 || static_cast<std::size_t>(key) >= bound) return std::nullopt;
    const auto k = static_cast<std::size_t>(key);
    const std::uint64_t bit = std::uint64_t{1} << (k % 64);
    if (bits[k / 64] & bit) return false;
    bits[k / 64] |= bit;
  }
  return true;
}

// True when every key surely differs from every other: their hashes, mixed,
// all differ in an open-addressed table (linear time, one allocation). False
// when two agree, and the exact search decides.
template <typename Key>
bool surely_distinct(const std::vector<Key>& keys) {
  if constexpr (std::is_same_v<Key, int>) {
    if (const auto distinct = distinct_small(keys)) return *distinct;
  }
  std::size_t size = 16;
  while (size < keys.size() * 2) size <<= 1;
  std::vector<std::uint64_t> slots(size, 0);  // 0: empty
  for (const Key& key : keys) {
    std::uint64_t h = key_hash(key) * 0x9E3779B97F4A7C15ULL;
    h = (h ^ (h >> 29)) | 1;
    for (std::size_t i = (h >> 32) & (size - 1);; i = (i + 1) & (size - 1)) {
      if (slots[i] == h) return false;
      if (slots[i] == 0) {
        slots[i] = h;
        break;
      }
    }
  }
  return true;
}

// The first key equal to an earlier one, in the keys' order: (its index, the
// earlier one's); nullopt when all differ. What a set filled in order finds,
// by sorting (key, index) pairs: n log n, and no allocation per key; mostly
// spared by surely_distinct, as tables seldom repeat anything.
template <typename Key>
std::optional<std::pair<std::size_t, std::size_t>> first_repeat(const std::vector<Key>& keys) {
  if (surely_distinct(keys)) return std::nullopt;
  std::vector<std::pair<Key, std::size_t>> sorted;
  sorted.reserve(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) sorted.emplace_back(keys[i], i);
  std::sort(sorted.begin(), sorted.end());  // equal keys in their order: a run's second is its first repeat
  std::optional<std::pair<std::size_t, std::size_t>> found;
  for (std::size_t k = 1; k < sorted.size(); ++k) {
    const bool repeats = sorted[k].first == sorted[k - 1].first;
    const bool second = k == 1 || !(sorted[k - 2].first == sorted[k].first);
    if (repeats && second && (!found || sorted[k].second < found->first)) {
      found = {{sorted[k].second, sorted[k - 1].second}};
    }
  }
  return found;
}

}  // namespace

std::string shorten(std::string_view text) {
  if (text.size() <= max_shown_bytes) return std::string(text);
  return std::string(text.substr(0, utf8_prefix_length(text, max_shown_bytes))) + "...";
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
void append_key(std::string& pointer, std::string_view key) {
  pointer += '/';
  for (const char c : key) {
    if (c == '~')
      pointer += "~0";
    else if (c == '/')
      pointer += "~1";
    else
      pointer += c;
  }
}

void append_index(std::string& pointer, std::size_t index) {
  pointer += '/';
  pointer += std::to_string(index);
}

std::string child(const std::string& pointer, std::string_view key) {
  std::string out = pointer;
  append_key(out, key);
  return out;
}

std::string child(const std::string& pointer, std::size_t index) {
  std::string out = pointer;
  append_index(out, index);
  return out;
}

std::string Origins::server(std::size_t i) const { return servers.empty() ? child("/server_list", i) : servers[i]; }

std::string Origins::device(Place place) const {
  if (devices.empty()) return child(child(server(place.server), "device"), place.device);
  return devices[place.server][place.device];
}

// Each duplicate is reported at its second occurrence, naming the first.
// Positions are kept, and pointers made only for the message.
std::vector<int> Checker::check_unique(const RankTable& table, const std::vector<IpKey>* ip_keys) const {
  const auto at = [&](Place place, std::string_view field) { return child(origins_.device(place), field); };
  const auto server_at = [&](std::size_t i) { return child(origins_.server(i), "server_id"); };
  // Compared as addresses, as the search for this machine's server compares
  // them: "10.0.0.1" and "::ffff:10.0.0.1" are one machine.
  std::vector<std::string> server_ids;
  server_ids.reserve(table.servers.size());
  for (const auto& server : table.servers) server_ids.push_back(address_key(server.server_id));
  if (const auto repeat = first_repeat(server_ids)) {
    fail(Kind::duplicate, server_at(repeat->first),
         fmt::format("server {} listed twice (also at {})", table.servers[repeat->first].server_id,
                     server_at(repeat->second)));
  }
  // One walk of the devices (a 65,536-rank table's are 7 MB: each walk costs
  // a millisecond): device ids checked server by server, as they come first;
  // ranks and device_ips gathered, as keys alone, in table order (a repeat's
  // place is found again only to word it).
  std::vector<int> device_ids;
  std::vector<int> ranks;
  ranks.reserve(static_cast<std::size_t>(table.world_size));
  // Compared as addresses: "fe80::1" is "fe80:0::1", "::ffff:10.0.0.1" is "10.0.0.1".
  std::vector<IpKey> made;
  if (!ip_keys) made.reserve(static_cast<std::size_t>(table.world_size));
  for (std::size_t i = 0; i < table.servers.size(); ++i) {
    const auto& server = table.servers[i];
    device_ids.clear();
    for (const auto& device : server.devices) {
      device_ids.push_back(device.device_id);
      ranks.push_back(device.rank_id);
      if (device.device_ip && !ip_keys) made.push_back(address_bytes(*device.device_ip).value_or(IpKey{}));
    }
    if (const auto repeat = first_repeat(device_ids)) {
      // Two pods of one host, two ranks of a 2.0 rank_list: say which, since the file lists them apart.
      const bool apart = format_ == RankTableFormat::v0_1 || format_ == RankTableFormat::v2_0;
      const std::string also = apart ? " (also at " + at({i, repeat->second}, "device_id") + ")" : "";
      fail(Kind::duplicate, at({i, repeat->first}, "device_id"),
           fmt::format("device {} listed twice on server {}{}", device_ids[repeat->first], server.server_id, also));
    }
  }
  if (const auto repeat = first_repeat(ranks)) {
    const auto place = [&](std::size_t k) { return nth_place(table, k, [](const RankTableDevice&) { return true; }); };
    fail(Kind::duplicate, at(place(repeat->first), "rank_id"),
         fmt::format("rank {} appears twice (also at {})", ranks[repeat->first], at(place(repeat->second), "rank_id")));
  }
  const std::vector<IpKey>& ips = ip_keys ? *ip_keys : made;
  if (const auto repeat = first_repeat(ips)) {
    const auto place = [&](std::size_t k) {
      return nth_place(table, k, [](const RankTableDevice& device) { return device.device_ip.has_value(); });
    };
    const Place second = place(repeat->first);
    const auto& ip = table.servers[second.server].devices[second.device].device_ip;
    fail(Kind::duplicate, at(second, "device_ip"),
         fmt::format("device_ip {} appears twice (also at {})", describe(Json(ip.value_or(""))),
                     at(place(repeat->second), "device_ip")));
  }
  return ranks;
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
  // super_device_id is read from format 1.2 only: other tables' devices
  // need no walk (a 65,536-rank table's take a millisecond).
  if (format_ != RankTableFormat::v1_2) return;
  std::vector<std::pair<std::size_t, std::int64_t>> super_ids;  // (super pod, super_device_id)
  std::vector<Place> places;
  const std::size_t no_pod = table.super_pods.size();
  for (std::size_t i = 0; i < table.servers.size(); ++i) {
    const auto it = pod_of_server.find(table.servers[i].server_id);
    const std::size_t pod = it == pod_of_server.end() ? no_pod : it->second;
    const auto& devices = table.servers[i].devices;
    for (std::size_t j = 0; j < devices.size(); ++j) {
      const auto& id = devices[j].super_device_id;
      if (!id) continue;
      super_ids.emplace_back(pod, *id);
      places.push_back({i, j});
    }
  }
  if (const auto repeat = first_repeat(super_ids)) {
    fail(Kind::duplicate, child(origins_.device(places[repeat->first]), "super_device_id"),
         fmt::format("super_device_id {} appears twice in one super pod (also at {})", super_ids[repeat->first].second,
                     child(origins_.device(places[repeat->second]), "super_device_id")));
  }
}

// `ranks`: check_unique's, unique by now, so there are world_size of them:
// they are exactly 0..N-1 unless some are >= N, and then as many below N are
// missing.
void Checker::check_rank_numbering(const RankTable& table, const std::vector<int>& ranks) const {
  const int n = table.world_size;
  std::vector<bool> present(static_cast<std::size_t>(n), false);
  std::vector<int> out_of_range;
  for (const int rank : ranks) {
    if (rank < n)
      present[static_cast<std::size_t>(rank)] = true;
    else
      out_of_range.push_back(rank);
  }
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
// `ranks`: check_unique's, in table order and all different, so a server's n
// ranks are one block when the largest is the smallest + n - 1 (sorted only
// to word a gap).
void Checker::check_contiguous_blocks(const RankTable& table, const std::vector<int>& all_ranks) const {
  std::vector<int> ranks;
  auto first = all_ranks.begin();
  for (const auto& server : table.servers) {
    const auto last = first + static_cast<std::ptrdiff_t>(server.devices.size());
    const auto [low, high] = std::minmax_element(first, last);
    const bool block = first == last || static_cast<std::size_t>(*high - *low) + 1 == server.devices.size();
    if (!block) ranks.assign(first, last);
    first = last;
    if (block) continue;
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
      fail(Kind::inconsistent, child(origins_.server(i), "server_id"),
           fmt::format("server {} is in no super pod of super_pod_list", table.servers[i].server_id));
    }
  }
}

}  // namespace davincirun::detail
