// Rank table parser. The rules and their precedence are listed in rank_table.hpp;
// this file decides the format and checks formats 1.0 and 1.2 element by
// element, in document order (the JSON text: rank_table_json.cpp; 0.1:
// rank_table_v0.cpp; 2.0: rank_table_v2.cpp; the uniqueness and table-wide
// rules: rank_table_rules.cpp).
#include "davincirun/rank_table.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/ip_address.hpp"
#include "rank_table/rank_table_checker.hpp"

namespace davincirun {

namespace detail {

// ---------------------------------------------------------------------------
// The format, and checks shared by all formats.

RankTable Checker::check(Json doc) {
  if (!doc.is_object()) {
    fail(Kind::shape, "", "expected a JSON object at the top level, got " + describe(doc));
  }
  format_ = detect_format(doc);  // the format decides how everything else is read
  RankTable table = format_ == RankTableFormat::v0_1   ? check_v0(doc)
                    : format_ == RankTableFormat::v2_0 ? check_v2(std::move(doc))
                                                       : check_v1(std::move(doc));
  table.format = format_;
  table.warnings = std::move(warnings_);
  return table;
}

// By keys: "version" when present decides; without it, group_list means 0.1.
RankTableFormat Checker::detect_format(const Json& top) const {
  const auto it = top.find("version");
  if (it == top.end()) {
    if (top.contains("group_list")) return RankTableFormat::v0_1;
    fail(Kind::missing, "/version", "required field missing: version (or group_list, for a format 0.1 table)");
  }
  const std::string& version = string_value(*it, "/version");
  // 0.1 has no version: it is told by its group_list.
  if (const auto format = enum_parse<RankTableFormat>(version); format && *format != RankTableFormat::v0_1) {
    return *format;
  }
  fail(Kind::unsupported, "/version",
       fmt::format("unsupported rank table version {} (supported: \"1.0\", \"1.2\", \"2.0\", and format "
                   "0.1, which has no version)",
                   describe(*it)));
}

void Checker::warn(const std::string& pointer, const std::string& text) {
  warnings_.push_back(fmt::format("{}: {}: {}", source_, pointer, text));
}

// Required fields are checked when their object is reached, before its members.
void Checker::require(const Json& object, const std::string& pointer,
                      std::initializer_list<std::string_view> keys) const {
  for (const std::string_view key : keys) {
    if (object.find(key) == object.end()) {
      fail(Kind::missing, child(pointer, key), fmt::format("required field missing: {}", key));
    }
  }
}

void Checker::expect_object(const Json& value, const std::string& pointer) const {
  if (!value.is_object()) fail(Kind::shape, pointer, "expected an object, got " + describe(value));
}

void Checker::expect_array(const Json& value, const std::string& pointer) const {
  if (!value.is_array()) fail(Kind::shape, pointer, "expected an array, got " + describe(value));
}

const std::string& Checker::string_value(const Json& value, const std::string& pointer) const {
  if (!value.is_string()) fail(Kind::shape, pointer, "expected a string, got " + describe(value));
  return value.get_ref<const std::string&>();
}

// HCCL writes these scalars as decimal strings; some generators write JSON
// integers. Only digits are accepted ("007" is 7); no sign, space, hex or exponent.
std::int64_t Checker::table_integer(const Json& value, const std::string& pointer, std::int64_t max) const {
  const auto not_integer = [&] {
    fail(Kind::bad_value, pointer, "expected a non-negative decimal integer, got " + describe(value));
  };
  const auto out_of_range = [&] {
    fail(Kind::bad_value, pointer, fmt::format("out of range (at most {}), got {}", max, describe(value)));
  };
  const auto limit = static_cast<std::uint64_t>(max);
  std::uint64_t number = 0;
  if (value.is_number_unsigned()) {
    number = value.get<std::uint64_t>();
  } else if (value.is_number_integer()) {
    if (value.get<std::int64_t>() < 0) not_integer();
    number = static_cast<std::uint64_t>(value.get<std::int64_t>());
  } else if (value.is_number_float()) {
    // Integers too long for 64 bits arrive here as floating point.
    const double d = value.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && d > static_cast<double>(max)) out_of_range();
    not_integer();
  } else if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) not_integer();
    for (const char digit : text) {  // stops as soon as too large, long before overflowing
      number = number * 10 + static_cast<std::uint64_t>(digit - '0');
      if (number > limit) out_of_range();
    }
  } else {
    fail(Kind::shape, pointer, "expected a decimal string or an integer, got " + describe(value));
  }
  if (number > limit) out_of_range();
  return static_cast<std::int64_t>(number);
}

int Checker::small_integer(const Json& value, const std::string& pointer) const {
  return static_cast<int>(table_integer(value, pointer));  // at most max_table_integer
}

std::string Checker::server_id(const Json& value, const std::string& pointer) const {
  const std::string& id = string_value(value, pointer);
  if (id.empty()) fail(Kind::bad_value, pointer, "server_id must not be empty, got \"\"");
  if (id.size() > max_server_id_bytes) {
    fail(Kind::bad_value, pointer,
         fmt::format("server_id is longer than {} bytes: {}", max_server_id_bytes, describe(value)));
  }
  return id;
}

// The placeholder a node writes when its NPU network is not configured is fatal
// only where the address is needed: between servers.
void Checker::require_device_ip_if_multi_server(const Json& device, const std::string& pointer) const {
  // Ranks on different servers reach each other through the device IPs.
  if (multi_server_ && !device.contains("device_ip")) {
    fail(Kind::missing, child(pointer, "device_ip"), "device_ip is required when the table has more than one server");
  }
}

std::optional<std::string> Checker::device_ip(const Json& value, const std::string& pointer) {
  const std::string& ip = string_value(value, pointer);
  if (ip == ip_placeholder) {
    if (multi_server_) {
      fail(Kind::bad_value, pointer,
           describe(value) +
               " is not an IP address (the placeholder a node writes when its NPU "
               "network is not configured)");
    }
    warn(pointer, describe(value) +
                      " is the placeholder a node writes when its NPU network is "
                      "not configured; read as absent (one server needs no device_ip)");
    return std::nullopt;
  }
  // HCCL reads a plain address: a zone ("%eth0") is refused, not dropped.
  if (!is_ip_address(ip) || ip.find('%') != std::string::npos) {
    fail(Kind::bad_value, pointer, describe(value) + " is not an IP address (expected an IPv4 or IPv6 literal)");
  }
  return ip;
}

// ---------------------------------------------------------------------------
// Formats 1.0 and 1.2.

RankTable Checker::check_v1(Json doc) {
  require(doc, "", {"server_list"});
  RankTable table;
  table.status = "completed";
  std::optional<int> server_count;
  for (const auto& [key, value] : doc.get_ref<const Json::object_t&>()) {
    const std::string at = child("", key);
    if (key == "server_count")
      server_count = small_integer(value, at);
    else if (key == "status")
      table.status = string_value(value, at);
    else if (key == "server_list")
      table.servers = servers(value, at);
    else if (key == "super_pod_list" && format_ == RankTableFormat::v1_2) {
      table.super_pods = super_pods(value, at);
    }
    // "version" is checked above; other fields are ignored (forward compatibility).
  }
  for (const auto& server : table.servers) table.world_size += static_cast<int>(server.devices.size());

  check_v1_rules(table, server_count);
  table.normalized_json = normalized_v1(std::move(doc), table, text_bytes_ + text_bytes_ / 8 + 64);
  return table;
}

// Uniqueness, then the table-wide rules, in their precedence.
void Checker::check_v1_rules(const RankTable& table, std::optional<int> server_count,
                             const std::vector<IpKey>* ip_keys) const {
  const std::vector<int> ranks = check_unique(table, ip_keys);
  check_super_pods_unique(table);
  check_rank_numbering(table, ranks);
  check_contiguous_blocks(table, ranks);
  check_server_count(table, server_count);
  check_super_pod_servers(table);
}

std::vector<RankTableServer> Checker::servers(const Json& list, const std::string& pointer) {
  expect_array(list, pointer);
  if (list.empty()) fail(Kind::bad_value, pointer, "server_list is empty");
  multi_server_ = list.size() > 1;
  std::vector<RankTableServer> out;
  out.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) out.push_back(server(list[i], child(pointer, i)));
  return out;
}

RankTableServer Checker::server(const Json& value, const std::string& pointer) {
  expect_object(value, pointer);
  require(value, pointer, {"server_id", "device"});
  // For messages about the devices, which may come before server_id is checked.
  const Json& id = *value.find("server_id");
  const bool named = id.is_string() && !id.get_ref<const std::string&>().empty();
  const std::string name = named ? shorten(id.get_ref<const std::string&>()) : pointer;

  RankTableServer out;
  for (const auto& [key, field] : value.get_ref<const Json::object_t&>()) {
    const std::string at = child(pointer, key);
    if (key == "server_id")
      out.server_id = server_id(field, at);
    else if (key == "device")
      out.devices = devices(field, at, name);
    else if (key == "host_ip")
      out.host_ip = string_value(field, at);
    else if (key == "container_ip")
      out.container_ip = string_value(field, at);
  }
  const auto by_rank = [](const auto& a, const auto& b) { return a.rank_id < b.rank_id; };
  // devices is never empty here: "device" is required and checked non-empty.
  out.rank_start = std::min_element(out.devices.begin(), out.devices.end(), by_rank)->rank_id;
  return out;
}

std::vector<RankTableDevice> Checker::devices(const Json& list, const std::string& pointer,
                                              const std::string& server_name) {
  expect_array(list, pointer);
  if (list.empty()) {
    fail(Kind::bad_value, pointer, fmt::format("server {} has no devices", server_name));
  }
  std::vector<RankTableDevice> out;
  out.reserve(list.size());
  for_each_element(list, pointer,
                   [&](const Json& element, const std::string& at) { out.push_back(device(element, at)); });
  return out;
}

RankTableDevice Checker::device(const Json& value, const std::string& pointer) {
  expect_object(value, pointer);
  require(value, pointer, {"device_id", "rank_id"});
  const bool v1_2 = format_ == RankTableFormat::v1_2;
  if (v1_2 && !value.contains("super_device_id")) {
    fail(Kind::missing, child(pointer, "super_device_id"),
         "required field missing: super_device_id (required in version 1.2)");
  }
  require_device_ip_if_multi_server(value, pointer);
  RankTableDevice out;
  std::string at = pointer;  // one buffer for every field's pointer: tables have 65,536 devices
  for (const auto& [key, field] : value.get_ref<const Json::object_t&>()) {
    at.resize(pointer.size());
    append_key(at, key);
    if (key == "device_id")
      out.device_id = small_integer(field, at);
    else if (key == "rank_id")
      out.rank_id = small_integer(field, at);
    else if (key == "device_ip")
      out.device_ip = device_ip(field, at);
    else if (key == "super_device_id" && v1_2) {
      out.super_device_id = table_integer(field, at, max_super_device_id);
    }
  }
  return out;
}

std::vector<RankTableSuperPod> Checker::super_pods(const Json& list, const std::string& pointer) const {
  expect_array(list, pointer);
  if (list.empty()) fail(Kind::bad_value, pointer, "super_pod_list is empty");
  std::vector<RankTableSuperPod> out;
  for (std::size_t p = 0; p < list.size(); ++p) out.push_back(super_pod(list[p], child(pointer, p)));
  return out;
}

// super_pod_id is a name for HCCL ("super_pod_id_0"); an integer is read as its digits.
RankTableSuperPod Checker::super_pod(const Json& value, const std::string& pointer) const {
  expect_object(value, pointer);
  require(value, pointer, {"super_pod_id", "server_list"});
  RankTableSuperPod out;
  for (const auto& [key, field] : value.get_ref<const Json::object_t&>()) {
    const std::string at = child(pointer, key);
    if (key == "super_pod_id") {
      if (field.is_number()) {
        out.super_pod_id = std::to_string(table_integer(field, at, max_super_device_id));
        continue;
      }
      out.super_pod_id = string_value(field, at);
      if (out.super_pod_id.empty() || out.super_pod_id.size() > max_super_pod_id_bytes) {
        fail(Kind::bad_value, at,
             fmt::format("super_pod_id must be 1 to {} bytes long, got {}", max_super_pod_id_bytes, describe(field)));
      }
    } else if (key == "server_list") {
      expect_array(field, at);
      if (field.empty()) fail(Kind::bad_value, at, "a super pod must list at least one server");
      for (std::size_t k = 0; k < field.size(); ++k) {
        const std::string entry = child(at, k);
        expect_object(field[k], entry);
        require(field[k], entry, {"server_id"});
        out.server_ids.push_back(server_id(*field[k].find("server_id"), child(entry, "server_id")));
      }
    }
  }
  return out;
}

}  // namespace detail

namespace {

RankTable parse_text(std::string_view text, const std::string& source, bool padded, bool fast) {
  constexpr std::string_view utf8_bom = "\xEF\xBB\xBF";
  detail::Checker checker(source);
  const std::size_t skipped = text.substr(0, utf8_bom.size()) == utf8_bom ? utf8_bom.size() : 0;
  if (text.find_first_not_of(" \t\r\n", skipped) == std::string_view::npos) {
    checker.fail(detail::Kind::empty, std::nullopt, "empty file");
  }
  if (fast) {
    if (auto table = checker.read_v1_fast(text.substr(skipped), padded)) return std::move(*table);
  }
  detail::Json doc = checker.parse(text, skipped);
  try {
    return checker.check(std::move(doc));
  } catch (const detail::Json::exception& e) {
    // Every value's type is tested before it is read, so this would be a bug;
    // still report a bad table rather than let a library exception escape.
    checker.fail(detail::Kind::shape, std::nullopt, std::string("cannot read the table: ") + e.what());
  }
}

}  // namespace

RankTable detail::parse_table_text(std::string_view text, const std::string& source, bool padded) {
  return parse_text(text, source, padded, true);
}

RankTable detail::parse_table_thoroughly(std::string_view text, const std::string& source) {
  return parse_text(text, source, false, false);
}

RankTable parse_rank_table(std::string_view text, const std::string& source) {
  try {
    return detail::parse_table_text(text, source);
  } catch (const detail::UnfinishedJson& e) {
    throw RankTableError(e);  // the public type; only the loader tells the two apart
  }
}

}  // namespace davincirun
