// Everything a RankTable holds, as one text: two readers agree on a table
// when their fingerprints are equal (tests/cpp/test_rank_table_fast.cpp and
// the fuzzer, tests/fuzz/fuzz_rank_table.cpp, compare the fast reader with
// the thorough one so).
#pragma once

#include <string>

#include "common/wide_hash.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/rank_table.hpp"

namespace rank_table_test {

template <typename T>
std::string optional_text(const std::optional<T>& value) {
  if (!value) return "-";
  if constexpr (std::is_same_v<T, std::string>) {
    return "'" + *value + "'";
  } else {
    return std::to_string(*value);
  }
}

inline std::string fingerprint(const davincirun::RankTable& table) {
  std::string out = "format " + std::string(to_string(table.format)) + " status '" + table.status + "' world " +
                    std::to_string(table.world_size) + "\n";
  for (const auto& server : table.servers) {
    out += "server '" + server.server_id + "' host " + optional_text(server.host_ip) + " container " +
           optional_text(server.container_ip) + " start " + std::to_string(server.rank_start) + " pods";
    for (const auto& pod : server.pod_names) out += " '" + pod + "'";
    out += "\n";
    for (const auto& d : server.devices) {
      out += "  device " + std::to_string(d.device_id) + " rank " + std::to_string(d.rank_id) + " ip " +
             optional_text(d.device_ip) + " super " + optional_text(d.super_device_id) + " pod " +
             optional_text(d.pod_name) + " local " + optional_text(d.local_id) + "\n";
    }
  }
  for (const auto& pod : table.super_pods) {
    out += "super pod '" + pod.super_pod_id + "':";
    for (const auto& id : pod.server_ids) out += " '" + id + "'";
    out += "\n";
  }
  for (const auto& warning : table.warnings) out += "warning " + warning + "\n";
  // Made beside the text by one reader, left to the plan by the other: the
  // same when made.
  if (table.normalized_hash && *table.normalized_hash != davincirun::detail::wide_hash64(table.normalized_json)) {
    out += "normalized_hash is not the text's\n";
  }
  return out + "normalized:\n" + table.normalized_json;
}

/// The outcome of reading a text: the fingerprint of its table, or the error.
template <typename Read>
std::string outcome(Read&& read) {
  try {
    return fingerprint(read());
  } catch (const davincirun::RankTableError& e) {
    return "error " + std::to_string(static_cast<int>(e.kind())) + " " + e.what();
  }
}

}  // namespace rank_table_test
