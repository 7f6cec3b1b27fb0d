// libFuzzer target for the rank table parser.
//
// Contract under test: any byte string given to parse_rank_table either yields
// a table for which every promise of rank_table.hpp holds, or throws
// RankTableError with a non-empty message starting with the source name. The
// status reader the loader applies to the same raw bytes (top_level_status)
// never throws. The fast reader of 1.x tables and the thorough reader give
// the same outcome: the same table, normalized text and warnings, or the same
// error. Anything else (another exception, a crash, a leak, undefined
// behaviour, a broken promise) is a finding: the target prints what broke and
// aborts, and libFuzzer saves the input.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "davincirun/errors.hpp"
#include "davincirun/rank_table.hpp"
#include "rank_table/rank_table_checker.hpp"
#include "rank_table_fingerprint.hpp"

namespace {

using davincirun::RankTable;
using davincirun::RankTableDevice;
using davincirun::RankTableError;
using davincirun::RankTableFormat;

const std::string source = "fuzz.json";

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

void expect(bool ok, const std::string& what) {
  if (!ok) finding(what);
}

// The address bytes of an IPv4/IPv6 literal (an IPv4-mapped IPv6 address
// as the IPv4 address it carries), computed here rather than with the
// parser's own helper so that the two can disagree.
std::optional<std::string> address_bytes(const std::string& text) {
  if (text.find('\0') != std::string::npos) return std::nullopt;
  unsigned char bytes[sizeof(in6_addr)];
  if (::inet_pton(AF_INET, text.c_str(), bytes) == 1) return std::string(reinterpret_cast<char*>(bytes), 4);
  if (::inet_pton(AF_INET6, text.c_str(), bytes) == 1) {
    static constexpr unsigned char v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::equal(v4_mapped, v4_mapped + 12, bytes)) return std::string(reinterpret_cast<char*>(bytes + 12), 4);
    return std::string(reinterpret_cast<char*>(bytes), sizeof(in6_addr));
  }
  return std::nullopt;
}

// The promises rank_table.hpp makes about every table parse_rank_table returns.
void check_table(const RankTable& table) {
  const bool v0 = table.format == RankTableFormat::v0_1;
  const bool v1_2 = table.format == RankTableFormat::v1_2;
  const bool v2 = table.format == RankTableFormat::v2_0;
  expect(!table.servers.empty(), "a parsed table has no servers");
  // 2.0 servers are grouped one way: by every rank's host_ip, or by none.
  const bool by_host = table.servers.front().host_ip.has_value();

  std::size_t devices = 0;
  std::set<int> ranks;
  std::set<std::string> server_ids;
  std::set<std::string> server_keys;
  std::set<std::string> ips;
  const bool multi_server = table.servers.size() > 1;
  for (const auto& server : table.servers) {
    // A 2.0 server is named by its ranks' host_ip or net_layer 0 net_instance_id (up to 1024 bytes).
    expect(!server.server_id.empty() && server.server_id.size() <= (v2 ? 1024U : 64U),
           "server_id empty or too long: " + server.server_id);
    if (v2) {
      expect(server.host_ip.has_value() == by_host, "2.0 servers grouped by host_ip and by net_layer 0 at once");
      expect(!server.host_ip || *server.host_ip == server.server_id, "a 2.0 server_id other than its host_ip");
      expect(!server.container_ip, "container_ip on a 2.0 server");
    }
    expect(server_ids.insert(server.server_id).second, "server_id repeated: " + server.server_id);
    // Server ids that are addresses are one server when they name one address.
    const auto address = address_bytes(server.server_id);
    expect(server_keys.insert(address ? "a" + *address : "n" + server.server_id).second,
           "server_id names the address of another server: " + server.server_id);
    expect(!server.devices.empty(), "server " + server.server_id + " has no devices");
    expect(v0 == !server.pod_names.empty(), "pod_names set on a 1.x table or empty on a 0.1 table");

    std::set<int> device_ids;
    std::set<int> local_ids;
    std::set<int> server_ranks;
    for (const RankTableDevice& device : server.devices) {
      ++devices;
      expect(device.device_id >= 0 && device.device_id <= davincirun::max_table_integer,
             "device_id out of range: " + std::to_string(device.device_id));
      expect(device_ids.insert(device.device_id).second,
             "device_id " + std::to_string(device.device_id) + " repeated on server " + server.server_id);
      expect(ranks.insert(device.rank_id).second, "rank_id repeated: " + std::to_string(device.rank_id));
      server_ranks.insert(device.rank_id);
      expect(v1_2 == device.super_device_id.has_value(), "super_device_id present iff format 1.2");
      if (device.super_device_id) {
        expect(*device.super_device_id >= 0 && *device.super_device_id <= davincirun::max_super_device_id,
               "super_device_id out of range");
      }
      expect(v0 == device.pod_name.has_value(), "pod_name present iff format 0.1");
      expect(v2 == device.local_id.has_value(), "local_id present iff format 2.0");
      if (v2) {
        expect(device.device_id <= 64, "a 2.0 device_id above 64: " + std::to_string(device.device_id));
        expect(*device.local_id >= 0 && *device.local_id <= 64, "local_id out of range");
        expect(local_ids.insert(*device.local_id).second, "local_id repeated on server " + server.server_id);
        expect(!device.device_ip, "device_ip on a 2.0 device");
      }
      if (device.pod_name) {
        bool listed = false;
        for (const auto& name : server.pod_names) listed = listed || name == *device.pod_name;
        expect(listed, "a device's pod is not among its server's pod_names");
      }
      expect(v2 || !multi_server || device.device_ip.has_value(),
             "a device without device_ip on a table with several servers");
      if (device.device_ip) {
        const auto bytes = address_bytes(*device.device_ip);
        expect(bytes.has_value(), "device_ip is not an IP literal: " + *device.device_ip);
        expect(ips.insert(*bytes).second, "device_ip repeated: " + *device.device_ip);
      }
    }
    // Each server's ranks are one block starting at rank_start.
    expect(*server_ranks.begin() == server.rank_start, "rank_start is not the server's smallest rank");
    expect(*server_ranks.rbegin() - *server_ranks.begin() + 1 == static_cast<int>(server_ranks.size()),
           "server " + server.server_id + "'s ranks are not one contiguous block");
  }
  expect(static_cast<std::size_t>(table.world_size) == devices, "world_size differs from the device count");
  expect(!ranks.empty() && *ranks.begin() == 0 && *ranks.rbegin() == table.world_size - 1,
         "rank ids are not exactly 0..world_size-1");

  // Super pods: 1.2 only, unique ids, naming exactly the table's servers, each
  // once; super_device_id unique within one super pod.
  expect(v1_2 || table.super_pods.empty(), "super_pods on a table that is not 1.2");
  if (!table.super_pods.empty()) {
    std::set<std::string> pod_ids;
    std::map<std::string, std::size_t> pod_of_server;
    for (std::size_t p = 0; p < table.super_pods.size(); ++p) {
      const auto& pod = table.super_pods[p];
      expect(!pod.super_pod_id.empty(), "empty super_pod_id");
      expect(pod_ids.insert(pod.super_pod_id).second, "super_pod_id repeated: " + pod.super_pod_id);
      expect(!pod.server_ids.empty(), "a super pod without servers");
      for (const auto& id : pod.server_ids) {
        expect(server_ids.count(id) == 1, "super pod names unknown server " + id);
        expect(pod_of_server.emplace(id, p).second, "server in two super pods: " + id);
      }
    }
    expect(pod_of_server.size() == table.servers.size(), "a server is in no super pod");
  }
  if (v1_2) {
    std::set<std::pair<std::size_t, std::int64_t>> super_ids;
    std::map<std::string, std::size_t> pod_of_server;
    for (std::size_t p = 0; p < table.super_pods.size(); ++p) {
      for (const auto& id : table.super_pods[p].server_ids) pod_of_server.emplace(id, p);
    }
    for (const auto& server : table.servers) {
      const auto it = pod_of_server.find(server.server_id);
      const std::size_t pod = it == pod_of_server.end() ? table.super_pods.size() : it->second;
      for (const auto& device : server.devices) {
        expect(super_ids.emplace(pod, *device.super_device_id).second, "super_device_id repeated within a super pod");
      }
    }
  }

  expect(!table.normalized_json.empty(), "normalized_json is empty");
  expect(table.normalized_json.back() != '\n', "normalized_json ends with a newline");
  for (const auto& warning : table.warnings) {
    expect(warning.rfind(source + ": ", 0) == 0, "a warning does not start with the source: " + warning);
  }
}

// The normalized document must read back as the same table, in format 1.0
// (1.2 and 2.0 when read from them), and normalize to itself.
void check_round_trip(const RankTable& table) {
  RankTable again;
  try {
    again = davincirun::parse_rank_table(table.normalized_json, source);
  } catch (const RankTableError& e) {
    finding(std::string("the normalized table does not parse: ") + e.what() + "\n" + table.normalized_json);
  }
  check_table(again);
  const RankTableFormat expected = table.format == RankTableFormat::v0_1 ? RankTableFormat::v1_0 : table.format;
  expect(again.format == expected, "the normalized table has another format");
  expect(again.status == table.status, "status changed by normalizing");
  expect(again.world_size == table.world_size, "world_size changed by normalizing");
  expect(again.servers.size() == table.servers.size(), "server count changed by normalizing");
  for (std::size_t i = 0; i < table.servers.size(); ++i) {
    const auto& a = table.servers[i];
    const auto& b = again.servers[i];
    expect(a.server_id == b.server_id, "server_id changed by normalizing");
    expect(a.host_ip == b.host_ip && a.container_ip == b.container_ip, "host_ip/container_ip changed");
    expect(a.rank_start == b.rank_start, "rank_start changed by normalizing");
    expect(a.devices.size() == b.devices.size(), "device count changed by normalizing");
    for (std::size_t j = 0; j < a.devices.size(); ++j) {
      const auto& x = a.devices[j];
      const auto& y = b.devices[j];
      expect(x.device_id == y.device_id && x.rank_id == y.rank_id && x.device_ip == y.device_ip &&
                 x.super_device_id == y.super_device_id && x.local_id == y.local_id,
             "a device changed by normalizing (server " + a.server_id + ", device " + std::to_string(j) + ")");
    }
  }
  expect(again.super_pods.size() == table.super_pods.size(), "super pod count changed by normalizing");
  for (std::size_t p = 0; p < table.super_pods.size(); ++p) {
    expect(again.super_pods[p].super_pod_id == table.super_pods[p].super_pod_id &&
               again.super_pods[p].server_ids == table.super_pods[p].server_ids,
           "a super pod changed by normalizing");
  }
  expect(again.warnings.empty(),
         "the normalized table has warnings: " + (again.warnings.empty() ? std::string() : again.warnings.front()));
  expect(again.normalized_json == table.normalized_json, "normalizing is not idempotent");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  // The loader asks this of whatever bytes it finds, half-written files included.
  std::optional<std::string> status;
  try {
    status = davincirun::detail::top_level_status(text);
  } catch (...) {
    finding("top_level_status threw");
  }

  const std::string fast = rank_table_test::outcome([&] { return davincirun::parse_rank_table(text, source); });
  const std::string thorough =
      rank_table_test::outcome([&] { return davincirun::detail::parse_table_thoroughly(text, source); });
  expect(fast == thorough,
         "the fast reader disagrees with the thorough one:\n--- fast\n" + fast + "\n--- thorough\n" + thorough);

  std::optional<RankTable> table;
  try {
    table = davincirun::parse_rank_table(text, source);
  } catch (const RankTableError& e) {
    const std::string what = e.what();
    expect(!e.detail().empty(), "a RankTableError without detail");
    expect(what.rfind(source + ": ", 0) == 0, "a RankTableError not naming the source: " + what);
    expect(e.kind() != RankTableError::Kind::io, "kind io from parsing text: " + what);
    return 0;
  } catch (const std::exception& e) {
    finding(std::string("parse_rank_table threw something other than RankTableError: ") + e.what());
  } catch (...) {
    finding("parse_rank_table threw a non-std exception");
  }

  check_table(*table);
  // A top-level string status is the table's; without one it reads "completed".
  expect(table->status == status.value_or("completed"), "top_level_status disagrees with the parsed status");
  check_round_trip(*table);
  return 0;
}
