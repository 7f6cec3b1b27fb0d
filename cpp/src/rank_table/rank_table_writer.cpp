// The normalized rank table: what the ranks read. HCCL accepts only decimal
// strings for the scalars of a 1.x table (which a 0.1 table becomes), and only
// JSON integers for those of a 2.0 table, so the launcher hands the ranks this
// copy rather than the platform's file ("read leniently, write strictly").
// Tables made for people (this machine's, a merged one) are written the same way.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <stdexcept>

#include <fmt/format.h>

#include "common/atomic_file.hpp"
#include "common/private_file.hpp"
#include "davincirun/unique_fd.hpp"
#include "rank_table/rank_table_checker.hpp"

namespace davincirun {

namespace detail {

namespace {

template <typename Integer>
std::string decimal(Integer number) {
  return std::to_string(number);
}

// object[key] = the decimal text of `number`, unless it is that already (a
// table written by HCCL's rules changes nothing, and costs no allocation).
template <typename Integer>
void set_decimal(Json& object, const char* key, Integer number) {
  std::string text = decimal(number);
  Json& value = object[key];
  if (!value.is_string() || value.get_ref<const std::string&>() != text) value = std::move(text);
}

// Json::dump(2), into a string reserved for `expected` bytes: grown by
// doubling, the 8 MB of a 65,536-rank table cost more in copies and fresh
// pages than in writing. (Json::dump itself is written so, on nlohmann's
// serializer and output adapter.)
std::string dump(const Json& doc, std::size_t expected = 0) {
  std::string text;
  text.reserve(expected);
  // Strings are valid UTF-8 (the parser refuses anything else); replace is a guard.
  nlohmann::detail::serializer<Json> serializer(nlohmann::detail::output_adapter<char, std::string>(text), ' ',
                                                Json::error_handler_t::replace);
  serializer.dump(doc, true, false, 2);
  return text;
}

// object[key] = the integer its decimal text says (the parser checked the
// digits and their range), unless it is a JSON integer already.
void set_integer(Json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return;
  std::int64_t number = 0;
  for (const char digit : it->get_ref<const std::string&>()) number = number * 10 + (digit - '0');
  *it = number;
}

}  // namespace

// Unknown fields stay where they were; only values this parser reads change.
std::string normalized_v1(Json doc, const RankTable& table, std::size_t expected_bytes) {
  auto& servers = doc["server_list"];
  for (std::size_t i = 0; i < table.servers.size(); ++i) {
    auto& devices = servers[i]["device"];
    for (std::size_t j = 0; j < table.servers[i].devices.size(); ++j) {
      const RankTableDevice& device = table.servers[i].devices[j];
      Json& out = devices[j];
      set_decimal(out, "device_id", device.device_id);
      set_decimal(out, "rank_id", device.rank_id);
      if (device.super_device_id) set_decimal(out, "super_device_id", *device.super_device_id);
      if (!device.device_ip) out.erase("device_ip");  // a placeholder read as absent
    }
  }
  for (std::size_t p = 0; p < table.super_pods.size(); ++p) {
    doc["super_pod_list"][p]["super_pod_id"] = table.super_pods[p].super_pod_id;
  }

  // HCCL expects status and server_count; add them where absent.
  const bool has_status = doc.contains("status");
  const bool has_count = doc.contains("server_count");
  Json top = Json::object();
  if (!has_status) top["status"] = table.status;
  for (auto& [key, value] : doc.get_ref<Json::object_t&>()) {
    top[key] = key == "server_count" ? Json(decimal(table.servers.size())) : std::move(value);
    if (key == "version" && !has_count) top["server_count"] = decimal(table.servers.size());
  }
  return dump(top, expected_bytes);
}

// The layout of a hand-written 1.0 table; pod names stay in the RankTable only.
std::string normalized_from_v0(const RankTable& table) {
  Json servers = Json::array();
  for (const auto& server : table.servers) {
    Json devices = Json::array();
    for (const auto& device : server.devices) {
      Json out = Json::object();
      out["device_id"] = decimal(device.device_id);
      if (device.device_ip) out["device_ip"] = *device.device_ip;
      out["rank_id"] = decimal(device.rank_id);
      devices.push_back(std::move(out));
    }
    Json out = Json::object();
    out["server_id"] = server.server_id;
    out["device"] = std::move(devices);
    servers.push_back(std::move(out));
  }
  Json top = Json::object();
  top["status"] = table.status;
  top["version"] = "1.0";
  top["server_count"] = decimal(table.servers.size());
  top["server_list"] = std::move(servers);
  return dump(top);
}

// HCCL's 2.0 reader takes JSON integers only (nlohmann's get<int64_t>, which
// refuses a string); unknown fields stay where they were.
std::string normalized_v2(Json doc, const RankTable& table, std::size_t expected_bytes) {
  set_integer(doc, "rank_count");
  for (Json& rank : doc["rank_list"]) {
    for (const char* key : {"rank_id", "device_id", "local_id", "replaced_local_id", "device_port", "host_port"}) {
      set_integer(rank, key);
    }
    for (Json& level : rank["level_list"]) set_integer(level, "net_layer");
  }
  if (doc.contains("status")) return dump(doc, expected_bytes);
  Json top = Json::object();
  top["status"] = table.status;
  for (auto& [key, value] : doc.get_ref<Json::object_t&>()) top[key] = std::move(value);
  return dump(top, expected_bytes);
}

}  // namespace detail

namespace {

const std::string& normalized_text(const RankTable& table, const char* function) {
  if (table.normalized_json.empty()) {
    throw std::invalid_argument(std::string(function) +
                                ": the table has no normalized_json (it was not made by parse_rank_table)");
  }
  return table.normalized_json;
}

}  // namespace

void write_normalized_rank_table(const RankTable& table, const std::string& path) {
  const std::string& text = normalized_text(table, "write_normalized_rank_table");
  detail::write_private_file(path, text + "\n", "create rank table " + path);
}

void write_rank_table_file(const RankTable& table, const std::string& path) {
  const std::string& text = normalized_text(table, "write_rank_table_file");
  detail::write_file_atomically(path, text + "\n", 0644, "write rank table " + path);
}

}  // namespace davincirun
