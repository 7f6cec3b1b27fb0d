// Internals of the rank table parser, shared by its files:
//   rank_table_json.cpp    the JSON text: limits, repeated keys, syntax errors;
//   rank_table.cpp         format detection, formats 1.0 and 1.2;
//   rank_table_v0.cpp      format 0.1 and its conversion to 1.0;
//   rank_table_v2.cpp      format 2.0: its ranks and their servers;
//   rank_table_v2_levels.cpp  format 2.0: a rank's level_list;
//   rank_table_v1_fast.cpp the fast reader of plain 1.x tables (simdjson);
//   rank_table_rules.cpp   uniqueness and table-wide rules, message helpers;
//   rank_table_writer.cpp  the normalized document and writing it.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "davincirun/errors.hpp"
#include "davincirun/rank_table.hpp"

namespace davincirun::detail {

using Json = nlohmann::ordered_json;  // keeps members in document order
using Kind = RankTableError::Kind;

inline constexpr std::size_t max_server_id_bytes = 64;      // HCCL's limit
inline constexpr std::size_t max_super_pod_id_bytes = 127;  // HCCL: "fewer than 128 characters"
/// What a node writes for device_ip when its NPU network is not configured.
inline constexpr std::string_view ip_placeholder = "-.-.-.-";

/// Cuts `text` to a readable length without splitting a UTF-8 sequence.
std::string shorten(std::string_view text);
/// Names a value in a message: strings quoted, scalars as JSON, containers by kind.
std::string describe(const Json& value);
/// RFC 6901 pointer of a member or an element of the value at `pointer`.
std::string child(const std::string& pointer, std::string_view key);
std::string child(const std::string& pointer, std::size_t index);
/// The same, appended to `pointer` in place (a reused buffer allocates nothing).
void append_key(std::string& pointer, std::string_view key);
void append_index(std::string& pointer, std::size_t index);
/// Calls fn(element, its pointer) for each element of the array `list` at
/// `pointer`, the pointers made in one reused buffer: a table of 65,536
/// ranks allocates one, not one per rank.
template <typename Fn>
void for_each_element(const Json& list, const std::string& pointer, Fn&& fn) {
  std::string at = pointer;
  for (std::size_t i = 0; i < list.size(); ++i) {
    at.resize(pointer.size());
    append_index(at, i);
    fn(list[i], at);
  }
}
/// The top-level "status" of a JSON document, when it is an object with a
/// string status; nullopt otherwise (never throws).
std::optional<std::string> top_level_status(std::string_view text);

/// The syntax error of a text that stops before its JSON does: every byte
/// read was a valid continuation and the parser wanted more (the text, NUL
/// bytes at its end aside, is a proper prefix of a JSON document). A file
/// still being written looks so; one broken mid-text never does.
class UnfinishedJson : public RankTableError {
 public:
  using RankTableError::RankTableError;
};

/// parse_rank_table, but a text that stops before its JSON does throws
/// UnfinishedJson (the loader waits on it), never a plain RankTableError.
/// `padded`: at least 64 readable bytes follow the text (simdjson's
/// SIMDJSON_PADDING), which spares the fast reader a copy.
RankTable parse_table_text(std::string_view text, const std::string& source, bool padded = false);
/// parse_table_text without the fast reader: what it must agree with (the
/// fuzzer and tests/cpp/test_rank_table_fast.cpp compare the two).
RankTable parse_table_thoroughly(std::string_view text, const std::string& source);

/// Remembers where each value was first seen, to name it when it comes again.
template <typename T>
class FirstSeen {
 public:
  /// Records `value` at `pointer`; returns the earlier pointer when it is a repeat.
  std::optional<std::string> repeat(const T& value, std::string pointer) {
    const auto [it, inserted] = seen_.emplace(value, std::move(pointer));
    if (inserted) return std::nullopt;
    return it->second;
  }

 private:
  std::map<T, std::string> seen_;
};

/// A device of a RankTable: its server's index and its own in that server.
/// A device_ip as check_unique compares it: its address_bytes().
using IpKey = std::array<unsigned char, 16>;

struct Place {
  std::size_t server = 0;
  std::size_t device = 0;
};

/// Where each server and device of a RankTable was read: JSON Pointers into the
/// original document, so that 0.1 tables are reported in their own terms.
/// A 1.x table's are its positions (/server_list/I/device/J), made on demand.
struct Origins {
  std::vector<std::string> servers;               ///< 0.1 only: the object holding each server's server_id
  std::vector<std::vector<std::string>> devices;  ///< 0.1 only: each device object, per server

  std::string server(std::size_t i) const;
  std::string device(Place place) const;
};

/// One 0.1 pod (instance) as read, before ordering.
struct V0Pod {
  std::string pointer;  ///< /group_list/G/instance_list/K
  std::size_t group = 0;
  std::optional<int> number;  ///< the integer after the last '-' of pod_name
  std::string pod_name;
  std::string server_id;
  std::vector<RankTableDevice> devices;
};

/// A count a 0.1 file declares (group_count...) that disagrees with the lists;
/// reported after the element and uniqueness rules.
struct V0CountMismatch {
  std::string pointer;
  std::string detail;
};

/// One 2.0 rank as read, before its server is known.
struct V2Rank {
  std::string pointer;  ///< /rank_list/K
  RankTableDevice device;
  std::string server;  ///< what names its server: host_ip, else the net_layer 0 net_instance_id
  std::optional<std::string> host_ip;
};

/// Walks a parsed document in document order and turns the first problem found
/// into a RankTableError naming the source and the JSON Pointer.
class Checker {
 public:
  explicit Checker(const std::string& source) : source_(source) {}

  [[noreturn]] void fail(Kind kind, std::optional<std::string> pointer, std::string detail) const {
    throw RankTableError(kind, source_, std::move(pointer), std::move(detail));
  }

  Json parse(std::string_view file, std::size_t skipped);
  RankTable check(Json doc);
  /// A plain 1.0 or 1.2 table (`json`: the text after any BOM) read fast; nullopt
  /// when the text is anything else, or anything but plain (rank_table_v1_fast.cpp):
  /// then parse() and check() read it and word what they find, so that errors and
  /// warnings are always theirs. Throws what the table-wide rules throw.
  std::optional<RankTable> read_v1_fast(std::string_view json, bool padded);

 private:
  [[noreturn]] void syntax_error(std::string_view file, std::size_t skipped, std::size_t offset,
                                 std::string_view reason, bool unfinished = false) const;
  RankTableFormat detect_format(const Json& top) const;
  void warn(const std::string& pointer, const std::string& text);

  // Element checks shared by all formats (precedence 2).
  void require(const Json& object, const std::string& pointer, std::initializer_list<std::string_view> keys) const;
  const std::string& string_value(const Json& value, const std::string& pointer) const;
  std::int64_t table_integer(const Json& value, const std::string& pointer, std::int64_t max = max_table_integer) const;
  int small_integer(const Json& value, const std::string& pointer) const;
  std::string server_id(const Json& value, const std::string& pointer) const;
  void expect_object(const Json& value, const std::string& pointer) const;
  void expect_array(const Json& value, const std::string& pointer) const;
  std::optional<std::string> device_ip(const Json& value, const std::string& pointer);
  void require_device_ip_if_multi_server(const Json& device, const std::string& pointer) const;

  // Formats 1.0 and 1.2 (rank_table.cpp).
  RankTable check_v1(Json doc);
  std::vector<RankTableServer> servers(const Json& list, const std::string& pointer);
  RankTableServer server(const Json& value, const std::string& pointer);
  std::vector<RankTableDevice> devices(const Json& list, const std::string& pointer, const std::string& server_name);
  RankTableDevice device(const Json& value, const std::string& pointer);
  std::vector<RankTableSuperPod> super_pods(const Json& list, const std::string& pointer) const;
  RankTableSuperPod super_pod(const Json& value, const std::string& pointer) const;

  // Format 0.1 (rank_table_v0.cpp).
  RankTable check_v0(const Json& doc);
  void v0_group(const Json& value, const std::string& pointer, std::size_t index, std::vector<V0Pod>& pods,
                std::vector<V0CountMismatch>& counts);
  V0Pod v0_pod(const Json& value, const std::string& pointer, bool numbered);
  RankTableDevice v0_device(const Json& value, const std::string& pointer);
  void v0_check_pods_unique(const std::vector<V0Pod>& pods) const;
  RankTable v0_convert(const std::vector<V0Pod>& ordered);
  void v0_check_adjacent(const std::vector<V0Pod>& ordered) const;
  void v0_check_counts(const std::vector<V0CountMismatch>& counts) const;

  // Format 2.0 (rank_table_v2.cpp; level_list: rank_table_v2_levels.cpp).
  RankTable check_v2(Json doc);
  V2Rank v2_rank(const Json& value, const std::string& pointer);
  int v2_integer(const Json& value, const std::string& pointer, int min, int max) const;
  std::optional<std::string> v2_levels(const Json& list, const std::string& pointer) const;
  std::pair<int, std::string> v2_level(const Json& value, const std::string& pointer) const;
  void v2_address(const Json& value, const std::string& pointer) const;
  RankTable v2_group(const std::vector<V2Rank>& ranks);
  void v2_check_local_ids(const RankTable& table) const;
  void v2_check_rank_count(const RankTable& table, int rank_count) const;

  // Uniqueness (precedence 3) and table-wide rules (precedence 4), rank_table_rules.cpp.
  // `ip_keys`: address_bytes() of every device_ip, in table order, where the
  // reader made them already (the fast reader); else check_unique makes them.
  // check_unique returns the rank ids in table order: the rules after it
  // read them there rather than walk the devices again.
  std::vector<int> check_unique(const RankTable& table, const std::vector<IpKey>* ip_keys = nullptr) const;
  void check_super_pods_unique(const RankTable& table) const;
  void check_rank_numbering(const RankTable& table, const std::vector<int>& ranks) const;
  void check_contiguous_blocks(const RankTable& table, const std::vector<int>& ranks) const;
  void check_server_count(const RankTable& table, std::optional<int> server_count) const;
  void check_v1_rules(const RankTable& table, std::optional<int> server_count,
                      const std::vector<IpKey>* ip_keys = nullptr) const;
  void check_super_pod_servers(const RankTable& table) const;

  const std::string& source_;
  RankTableFormat format_ = RankTableFormat::v1_0;
  bool multi_server_ = false;   // decides whether device_ip is required
  bool by_host_ = false;        // 2.0: some rank has a host_ip, so every rank needs one
  std::size_t text_bytes_ = 0;  // of the text parsed: the normalized copy is about as long
  Origins origins_;
  std::vector<std::string> warnings_;
};

/// The normalized document of a checked 1.x table (`doc` its original, changed
/// in place); `expected_bytes`: about how long it will be (the original's length).
std::string normalized_v1(Json doc, const RankTable& table, std::size_t expected_bytes);
/// The normalized document of a converted 0.1 table: format 1.0.
std::string normalized_from_v0(const RankTable& table);
/// The normalized document of a checked 2.0 table (`doc` its original,
/// changed in place): its integers JSON integers, status added when absent.
std::string normalized_v2(Json doc, const RankTable& table, std::size_t expected_bytes);

}  // namespace davincirun::detail
