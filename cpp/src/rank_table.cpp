// Rank table parser. The rules and their precedence are listed in rank_table.hpp;
// this file reads the JSON text, decides the format and checks formats 1.0 and
// 1.2 element by element, in document order (0.1: rank_table_v0.cpp; the
// uniqueness and table-wide rules: rank_table_rules.cpp).
#include "davincirun/rank_table.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "detail/rank_table_checker.hpp"

namespace davincirun {

std::string_view to_string(RankTableFormat format) {
  switch (format) {
    case RankTableFormat::v0_1: return "0.1";
    case RankTableFormat::v1_0: return "1.0";
    case RankTableFormat::v1_2: return "1.2";
  }
  return "unknown";
}

namespace detail {

namespace {

constexpr std::size_t max_server_id_bytes = 64;    // HCCL's limit
constexpr std::size_t max_super_pod_id_bytes = 127;  // HCCL: "fewer than 128 characters"
constexpr int max_nesting = 64;  // a rank table nests 7 deep; bounds memory on hostile input
// A rank table object has about a dozen keys. Inserting a key costs a linear
// search (here and in nlohmann's ordered_map), so this bounds the time a
// hostile file of many keys takes (quadratic in the keys of one object).
constexpr std::size_t max_keys = 256;
constexpr std::string_view ip_placeholder = "-.-.-.-";

// Thrown from the parser callback to stop reading a document nested deeper than
// any rank table, before it can use much memory.
struct TooDeep {};

// Thrown from the parser callback at the second occurrence of a key in one
// object, of which nlohmann would silently keep one value.
struct RepeatedKey {
  std::string pointer;
  std::string key;
};

// Thrown from the parser callback at key max_keys + 1 of one object.
struct TooManyKeys {
  std::string pointer;  // of the object
};

// The parser callback: limits the nesting and refuses repeated keys as the text
// is read. It follows where the parser is (the member or element being read in
// each open container) only to give the repeated key's pointer.
class ParseGuard {
 public:
  // `depth` counts the containers open around the event (the object itself for a key).
  bool operator()(int depth, Json::parse_event_t event, Json& parsed) {
    if (depth > max_nesting) throw TooDeep{};
    const auto level = static_cast<std::size_t>(depth);
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        begin_element(level);
        open(level, event == Json::parse_event_t::object_start);
        break;
      case Json::parse_event_t::key:
        add_key(level - 1, parsed.get_ref<const std::string&>());
        break;
      case Json::parse_event_t::value:
        begin_element(level);
        break;
      default:  // a closed container's frame is reused by the next one at its depth
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool object = false;
    std::size_t elements = 0;        // an array's elements begun so far
    std::vector<std::string> keys;   // an object's keys so far; the last is being read
  };

  void begin_element(std::size_t level) {
    if (level > 0 && !frames_[level - 1].object) ++frames_[level - 1].elements;
  }

  // Frames are cleared rather than freed: short keys then cost no allocation.
  void open(std::size_t level, bool object) {
    if (frames_.size() <= level) frames_.resize(level + 1);  // at most max_nesting + 1
    Frame& frame = frames_[level];
    frame.object = object;
    frame.elements = 0;
    frame.keys.clear();
  }

  // A linear search, as nlohmann's ordered_map does for the same insertion:
  // rank table objects have a handful of keys.
  void add_key(std::size_t level, const std::string& key) {
    std::vector<std::string>& keys = frames_[level].keys;
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) {
      throw RepeatedKey{child(pointer_to(level), key), key};
    }
    if (keys.size() == max_keys) throw TooManyKeys{pointer_to(level)};
    keys.push_back(key);
  }

  // The pointer of the container open at `level`.
  std::string pointer_to(std::size_t level) const {
    std::string pointer;
    for (std::size_t i = 0; i < level; ++i) {
      const Frame& outer = frames_[i];
      pointer = outer.object ? child(pointer, outer.keys.back()) : child(pointer, outer.elements - 1);
    }
    return pointer;
  }

  std::vector<Frame> frames_;  // one per open container, outermost first
};

// "[json.exception.parse_error.101] parse error at line 1, column 9: syntax error
// while parsing value - invalid literal; last read: 'tru'" -> "invalid literal".
// The "last read" part is dropped: it quotes raw (possibly huge) input.
std::string short_reason(std::string_view what) {
  if (const auto dash = what.find(" - "); dash != std::string_view::npos) {
    what.remove_prefix(dash + 3);
  }
  return std::string(what.substr(0, what.find("; last read")));
}

// Reads a document only to find where a number too large for a double starts:
// nlohmann's DOM parser throws out_of_range 406 for it with no position, but
// hands the position (just past the number) to a SAX reader.
class OverflowFinder : public nlohmann::json_sax<Json> {
 public:
  std::optional<std::size_t> start;  // byte offset of the number in the text
  std::string number;                // its text

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string& token,
                   const Json::exception& e) override {
    if (e.id == 406 && token.size() <= position) {  // a number's token is plain ASCII
      start = position - token.size();
      number = token;
    }
    return false;
  }
};

}  // namespace

std::optional<std::string> top_level_status(std::string_view text) {
  try {
    const Json doc = Json::parse(text.begin(), text.end(), ParseGuard{});  // skips a BOM itself
    const auto it = doc.is_object() ? doc.find("status") : doc.end();
    if (it == doc.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
  } catch (...) {  // not JSON, too deep, a repeated key, out of memory: no status to read
    return std::nullopt;
  }
}

// ---------------------------------------------------------------------------
// Reading the JSON text.

// `file` may start with a BOM of `skipped` bytes, which nlohmann skips itself (once).
Json Checker::parse(std::string_view file, std::size_t skipped) const {
  Json doc;
  try {
    doc = Json::parse(file.begin(), file.end(), ParseGuard{});
  } catch (const Json::parse_error& e) {
    // e.byte counts the bytes read, the offending one included (one past the end at end of input).
    const std::size_t offset = e.byte == 0 ? 0 : e.byte - 1;
    const bool nul = offset < file.size() && file[offset] == '\0';
    syntax_error(file, skipped, offset, nul ? "unexpected NUL byte" : short_reason(e.what()));
  } catch (const Json::out_of_range&) {  // a number beyond a double's range, e.g. 1e400
    OverflowFinder finder;
    Json::sax_parse(file.begin(), file.end(), &finder);
    if (!finder.start) fail(Kind::syntax, std::nullopt, "not valid JSON: a number is out of range");
    syntax_error(file, skipped, *finder.start,
                 fmt::format("number {} is out of range", shorten(finder.number)));
  } catch (const TooDeep&) {
    fail(Kind::syntax, std::nullopt,
         fmt::format("not a rank table: JSON nested more than {} levels deep", max_nesting));
  } catch (const TooManyKeys& many) {
    fail(Kind::syntax, std::nullopt,
         fmt::format("not a rank table: the object at {} has more than {} keys",
                     many.pointer.empty() ? "the top level" : many.pointer, max_keys));
  } catch (const RepeatedKey& repeated) {
    fail(Kind::duplicate, repeated.pointer,
         fmt::format("the key {} appears twice in the same object; a rank table must not "
                     "repeat keys",
                     describe(Json(repeated.key))));
  }
  // nlohmann takes a NUL byte for the end of the input and ignores what follows it.
  if (const auto nul = file.find('\0'); nul != std::string_view::npos) {
    syntax_error(file, skipped, nul, "unexpected NUL byte");
  }
  return doc;
}

// Lines and columns count from 1 and ignore the BOM; columns count bytes. The
// byte offset counts from 0 from the start of the file.
void Checker::syntax_error(std::string_view file, std::size_t skipped, std::size_t offset,
                           std::string_view reason) const {
  offset = std::clamp(offset, skipped, file.size());
  const std::string_view before = file.substr(skipped, offset - skipped);
  const auto line = 1 + std::count(before.begin(), before.end(), '\n');
  const std::size_t newline = before.rfind('\n');
  const std::size_t line_start = newline == std::string_view::npos ? 0 : newline + 1;
  fail(Kind::syntax, std::nullopt,
       fmt::format("not valid JSON at line {}, column {} (byte {}): {}", line,
                   before.size() - line_start + 1, offset, reason));
}

// ---------------------------------------------------------------------------
// The format, and checks shared by all formats.

RankTable Checker::check(const Json& doc) {
  if (!doc.is_object()) {
    fail(Kind::shape, "", "expected a JSON object at the top level, got " + describe(doc));
  }
  format_ = detect_format(doc);  // the format decides how everything else is read
  RankTable table = format_ == RankTableFormat::v0_1 ? check_v0(doc) : check_v1(doc);
  table.format = format_;
  table.warnings = std::move(warnings_);
  return table;
}

// By keys: "version" when present decides; without it, group_list means 0.1.
RankTableFormat Checker::detect_format(const Json& top) const {
  const auto it = top.find("version");
  if (it == top.end()) {
    if (top.contains("group_list")) return RankTableFormat::v0_1;
    fail(Kind::missing, "/version",
         "required field missing: version (or group_list, for a format 0.1 table)");
  }
  const std::string& version = string_value(*it, "/version");
  for (const auto format : {RankTableFormat::v1_0, RankTableFormat::v1_2}) {
    if (version == to_string(format)) return format;
  }
  fail(Kind::unsupported, "/version",
       fmt::format("unsupported rank table version {} (supported: \"1.0\", \"1.2\", and format "
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
std::int64_t Checker::table_integer(const Json& value, const std::string& pointer,
                                    std::int64_t max) const {
  const auto not_integer = [&] {
    fail(Kind::bad_value, pointer,
         "expected a non-negative decimal integer, got " + describe(value));
  };
  const auto out_of_range = [&] {
    fail(Kind::bad_value, pointer,
         fmt::format("out of range (at most {}), got {}", max, describe(value)));
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
         fmt::format("server_id is longer than {} bytes: {}", max_server_id_bytes,
                     describe(value)));
  }
  return id;
}

// The placeholder a node writes when its NPU network is not configured is fatal
// only where the address is needed: between servers.
void Checker::require_device_ip_if_multi_server(const Json& device, const std::string& pointer) const {
  // Ranks on different servers reach each other through the device IPs.
  if (multi_server_ && !device.contains("device_ip")) {
    fail(Kind::missing, child(pointer, "device_ip"),
         "device_ip is required when the table has more than one server");
  }
}

std::optional<std::string> Checker::device_ip(const Json& value, const std::string& pointer) {
  const std::string& ip = string_value(value, pointer);
  if (ip == ip_placeholder) {
    if (multi_server_) {
      fail(Kind::bad_value, pointer,
           describe(value) + " is not an IP address (the placeholder a node writes when its NPU "
                             "network is not configured)");
    }
    warn(pointer, describe(value) + " is the placeholder a node writes when its NPU network is "
                                    "not configured; read as absent (one server needs no device_ip)");
    return std::nullopt;
  }
  if (!canonical_ip(ip)) {
    fail(Kind::bad_value, pointer,
         describe(value) + " is not an IP address (expected an IPv4 or IPv6 literal)");
  }
  return ip;
}

// ---------------------------------------------------------------------------
// Formats 1.0 and 1.2.

RankTable Checker::check_v1(const Json& doc) {
  require(doc, "", {"server_list"});
  RankTable table;
  table.status = "completed";
  std::optional<int> server_count;
  for (const auto& [key, value] : doc.get_ref<const Json::object_t&>()) {
    const std::string at = child("", key);
    if (key == "server_count") server_count = small_integer(value, at);
    else if (key == "status") table.status = string_value(value, at);
    else if (key == "server_list") table.servers = servers(value, at);
    else if (key == "super_pod_list" && format_ == RankTableFormat::v1_2) {
      table.super_pods = super_pods(value, at);
    }
    // "version" is checked above; other fields are ignored (forward compatibility).
  }
  for (std::size_t i = 0; i < table.servers.size(); ++i) {
    table.world_size += static_cast<int>(table.servers[i].devices.size());
    origins_.servers.push_back(child("/server_list", i));
    auto& devices = origins_.devices.emplace_back();
    for (std::size_t j = 0; j < table.servers[i].devices.size(); ++j) {
      devices.push_back(child(child(origins_.servers.back(), "device"), j));
    }
  }

  check_unique(table);
  check_super_pods_unique(table);
  check_rank_numbering(table);
  check_contiguous_blocks(table);
  check_server_count(table, server_count);
  check_super_pod_servers(table);
  table.normalized_json = normalized_v1(doc, table);
  return table;
}

std::vector<RankTableServer> Checker::servers(const Json& list, const std::string& pointer) {
  expect_array(list, pointer);
  if (list.empty()) fail(Kind::bad_value, pointer, "server_list is empty");
  multi_server_ = list.size() > 1;
  std::vector<RankTableServer> out;
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
    if (key == "server_id") out.server_id = server_id(field, at);
    else if (key == "device") out.devices = devices(field, at, name);
    else if (key == "host_ip") out.host_ip = string_value(field, at);
    else if (key == "container_ip") out.container_ip = string_value(field, at);
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
  for (std::size_t j = 0; j < list.size(); ++j) out.push_back(device(list[j], child(pointer, j)));
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
  for (const auto& [key, field] : value.get_ref<const Json::object_t&>()) {
    const std::string at = child(pointer, key);
    if (key == "device_id") out.device_id = small_integer(field, at);
    else if (key == "rank_id") out.rank_id = small_integer(field, at);
    else if (key == "device_ip") out.device_ip = device_ip(field, at);
    else if (key == "super_device_id" && v1_2) {
      out.super_device_id = table_integer(field, at, max_super_device_id);
    }
  }
  return out;
}

std::vector<RankTableSuperPod> Checker::super_pods(const Json& list,
                                                   const std::string& pointer) const {
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
             fmt::format("super_pod_id must be 1 to {} bytes long, got {}",
                         max_super_pod_id_bytes, describe(field)));
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

RankTable parse_rank_table(std::string_view text, const std::string& source) {
  constexpr std::string_view utf8_bom = "\xEF\xBB\xBF";
  detail::Checker checker(source);
  const std::size_t skipped = text.substr(0, utf8_bom.size()) == utf8_bom ? utf8_bom.size() : 0;
  if (text.find_first_not_of(" \t\r\n", skipped) == std::string_view::npos) {
    checker.fail(detail::Kind::empty, std::nullopt, "empty file");
  }
  const detail::Json doc = checker.parse(text, skipped);
  try {
    return checker.check(doc);
  } catch (const detail::Json::exception& e) {
    // Every value's type is tested before it is read, so this would be a bug;
    // still report a bad table rather than let a library exception escape.
    checker.fail(detail::Kind::shape, std::nullopt,
                 std::string("cannot read the table: ") + e.what());
  }
}

}  // namespace davincirun
