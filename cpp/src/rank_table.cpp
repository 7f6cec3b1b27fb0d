// Rank table parser. The rules and their precedence are listed in rank_table.hpp;
// this file checks them in that order, one small function per element.
#include "davincirun/rank_table.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "davincirun/errors.hpp"
#include "detail/unique_fd.hpp"

namespace davincirun {

std::string_view to_string(RankTableFormat format) {
  switch (format) {
    case RankTableFormat::v1_0: return "1.0";
  }
  return "unknown";
}

namespace {

using Json = nlohmann::ordered_json;  // keeps members in document order
using Kind = RankTableError::Kind;

constexpr std::size_t max_file_bytes = std::size_t{64} << 20;  // real ones: a few KiB per server
constexpr std::size_t max_server_id_bytes = 64;                // HCCL's limit
constexpr int max_nesting = 64;        // a rank table nests 4 deep; bounds memory on hostile input
constexpr std::size_t max_shown_bytes = 80;  // longer strings are shortened in messages
constexpr std::string_view utf8_bom = "\xEF\xBB\xBF";
constexpr std::string_view json_whitespace = " \t\r\n";
constexpr std::string_view ip_placeholder = "-.-.-.-";

// ---------------------------------------------------------------------------
// Small helpers for messages and pointers.

// Cuts `text` to max_shown_bytes without splitting a UTF-8 sequence.
std::string shorten(std::string_view text) {
  if (text.size() <= max_shown_bytes) return std::string(text);
  std::size_t cut = max_shown_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

// Names a value in a message: strings quoted and escaped, scalars as JSON,
// containers by kind only (dumping them would flood the message, and dump()
// recurses, which hostile nesting could exploit).
std::string describe(const Json& value) {
  if (value.is_object()) return "an object";
  if (value.is_array()) return "an array";
  if (!value.is_string()) return value.dump();
  return Json(shorten(value.get_ref<const std::string&>()))
      .dump(-1, ' ', false, Json::error_handler_t::replace);
}

// RFC 6901: "~" and "/" inside a reference token are written "~0" and "~1".
std::string child(const std::string& pointer, std::string_view key) {
  std::string out = pointer + '/';
  for (const char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

std::string child(const std::string& pointer, std::size_t index) {
  return pointer + '/' + std::to_string(index);
}

std::string device_pointer(std::size_t server, std::size_t device, std::string_view field) {
  return fmt::format("/server_list/{}/device/{}/{}", server, device, field);
}

// Calls fn(i, j, device) for each device j of each server i, in file order.
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

// The normalized text of an IPv4/IPv6 literal, so that "::1" and "0::1" compare
// equal; nullopt when `text` is not one.
std::optional<std::string> canonical_ip(const std::string& text) {
  if (text.find('\0') != std::string::npos) return std::nullopt;  // inet_pton stops at NUL
  unsigned char bytes[sizeof(in6_addr)];
  char out[INET6_ADDRSTRLEN];
  for (const int family : {AF_INET, AF_INET6}) {
    if (::inet_pton(family, text.c_str(), bytes) == 1 &&
        ::inet_ntop(family, bytes, out, sizeof out) != nullptr) {
      return std::string(out);
    }
  }
  return std::nullopt;
}

// Remembers where each value was first seen, to name it when it comes again.
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

// ---------------------------------------------------------------------------
// Reading the JSON text.

// Thrown from the parser callback to stop reading a document nested deeper than
// any rank table, before it can use much memory.
struct TooDeep {};

// "[json.exception.parse_error.101] parse error at line 1, column 9: syntax error
// while parsing value - invalid literal; last read: 'tru'" -> "invalid literal".
// The "last read" part is dropped: it quotes raw (possibly huge) input.
std::string short_reason(std::string_view what) {
  if (const auto dash = what.find(" - "); dash != std::string_view::npos) {
    what.remove_prefix(dash + 3);
  }
  return std::string(what.substr(0, what.find("; last read")));
}

// ---------------------------------------------------------------------------
// Checking the document.

// Walks a parsed document in document order and turns the first problem found
// into a RankTableError naming the source and the JSON Pointer.
class Checker {
 public:
  explicit Checker(const std::string& source) : source_(source) {}

  [[noreturn]] void fail(Kind kind, std::optional<std::string> pointer, std::string detail) const {
    throw RankTableError(kind, source_, std::move(pointer), std::move(detail));
  }

  Json parse(std::string_view file, std::size_t skipped) const;
  RankTable check(const Json& doc) const;

 private:
  [[noreturn]] void syntax_error(std::string_view file, std::size_t skipped, std::size_t offset,
                                 std::string_view reason) const;

  // Element checks (precedence 2), each in document order.
  void check_version(const Json& top) const;
  void require(const Json& object, const std::string& pointer,
               std::initializer_list<std::string_view> keys) const;
  const std::string& string_value(const Json& value, const std::string& pointer) const;
  int table_integer(const Json& value, const std::string& pointer) const;
  std::vector<RankTableServer> servers(const Json& list, const std::string& pointer) const;
  RankTableServer server(const Json& value, const std::string& pointer, bool multi_server) const;
  std::string server_id(const Json& value, const std::string& pointer) const;
  std::vector<RankTableDevice> devices(const Json& list, const std::string& pointer,
                                       const std::string& server_name, bool multi_server) const;
  RankTableDevice device(const Json& value, const std::string& pointer, bool multi_server) const;
  std::string device_ip(const Json& value, const std::string& pointer) const;

  // Uniqueness (precedence 3) and table-wide rules (precedence 4).
  void check_unique(const RankTable& table) const;
  void check_rank_numbering(const RankTable& table) const;
  void check_contiguous_blocks(const RankTable& table) const;
  void check_server_count(const RankTable& table, std::optional<int> server_count) const;

  const std::string& source_;
};

// `file` may start with a BOM of `skipped` bytes, which nlohmann skips itself (once).
Json Checker::parse(std::string_view file, std::size_t skipped) const {
  const auto limit_depth = [](int depth, Json::parse_event_t, Json&) {
    if (depth > max_nesting) throw TooDeep{};
    return true;
  };
  Json doc;
  try {
    doc = Json::parse(file.begin(), file.end(), limit_depth);
  } catch (const Json::parse_error& e) {
    // e.byte counts the bytes read, the offending one included (one past the end at end of input).
    const std::size_t offset = e.byte == 0 ? 0 : e.byte - 1;
    const bool nul = offset < file.size() && file[offset] == '\0';
    syntax_error(file, skipped, offset, nul ? "unexpected NUL byte" : short_reason(e.what()));
  } catch (const TooDeep&) {
    fail(Kind::syntax, std::nullopt,
         fmt::format("not a rank table: JSON nested more than {} levels deep", max_nesting));
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

RankTable Checker::check(const Json& doc) const {
  if (!doc.is_object()) {
    fail(Kind::shape, "", "expected a JSON object at the top level, got " + describe(doc));
  }
  check_version(doc);  // the version decides how everything else is read
  require(doc, "", {"server_list"});

  RankTable table;
  table.status = "completed";
  std::optional<int> server_count;
  for (const auto& [key, value] : doc.get_ref<const Json::object_t&>()) {
    const std::string at = child("", key);
    if (key == "server_count") server_count = table_integer(value, at);
    else if (key == "status") table.status = string_value(value, at);
    else if (key == "server_list") table.servers = servers(value, at);
    // "version" is checked above; other fields are ignored (forward compatibility).
  }
  for (const auto& server : table.servers) {
    table.world_size += static_cast<int>(server.devices.size());
  }

  check_unique(table);
  check_rank_numbering(table);
  check_contiguous_blocks(table);
  check_server_count(table, server_count);
  return table;
}

void Checker::check_version(const Json& top) const {
  const auto it = top.find("version");
  if (it == top.end()) {
    const char* hint = top.contains("group_list")
                           ? " (this looks like a format 0.1 table with group_list, "
                             "which is not supported yet)"
                           : "";
    fail(Kind::missing, "/version", fmt::format("required field missing: version{}", hint));
  }
  if (string_value(*it, "/version") != to_string(RankTableFormat::v1_0)) {
    fail(Kind::unsupported, "/version",
         fmt::format("unsupported rank table version {} (supported: \"1.0\")", describe(*it)));
  }
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

const std::string& Checker::string_value(const Json& value, const std::string& pointer) const {
  if (!value.is_string()) fail(Kind::shape, pointer, "expected a string, got " + describe(value));
  return value.get_ref<const std::string&>();
}

// HCCL writes these scalars as decimal strings; some generators write JSON
// integers. Only digits are accepted ("007" is 7); no sign, space, hex or exponent.
int Checker::table_integer(const Json& value, const std::string& pointer) const {
  const auto not_integer = [&] {
    fail(Kind::bad_value, pointer,
         "expected a non-negative decimal integer, got " + describe(value));
  };
  const auto out_of_range = [&] {
    fail(Kind::bad_value, pointer,
         fmt::format("out of range (at most {}), got {}", max_table_integer, describe(value)));
  };
  std::uint64_t number = 0;
  if (value.is_number_unsigned()) {
    number = value.get<std::uint64_t>();
  } else if (value.is_number_integer()) {
    if (value.get<std::int64_t>() < 0) not_integer();
    number = static_cast<std::uint64_t>(value.get<std::int64_t>());
  } else if (value.is_number_float()) {
    // Integers too long for 64 bits arrive here as floating point.
    const double d = value.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && d > static_cast<double>(max_table_integer)) {
      out_of_range();
    }
    not_integer();
  } else if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) not_integer();
    for (const char digit : text) {  // stops as soon as too large, long before overflowing
      number = number * 10 + static_cast<std::uint64_t>(digit - '0');
      if (number > static_cast<std::uint64_t>(max_table_integer)) out_of_range();
    }
  } else {
    fail(Kind::shape, pointer, "expected a decimal string or an integer, got " + describe(value));
  }
  if (number > static_cast<std::uint64_t>(max_table_integer)) out_of_range();
  return static_cast<int>(number);
}

std::vector<RankTableServer> Checker::servers(const Json& list, const std::string& pointer) const {
  if (!list.is_array()) fail(Kind::shape, pointer, "expected an array, got " + describe(list));
  if (list.empty()) fail(Kind::bad_value, pointer, "server_list is empty");
  const bool multi_server = list.size() > 1;
  std::vector<RankTableServer> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    out.push_back(server(list[i], child(pointer, i), multi_server));
  }
  return out;
}

RankTableServer Checker::server(const Json& value, const std::string& pointer,
                                bool multi_server) const {
  if (!value.is_object()) fail(Kind::shape, pointer, "expected an object, got " + describe(value));
  require(value, pointer, {"server_id", "device"});
  // For messages about the devices, which may come before server_id is checked.
  const Json& id = *value.find("server_id");
  const bool named = id.is_string() && !id.get_ref<const std::string&>().empty();
  const std::string name = named ? shorten(id.get_ref<const std::string&>()) : pointer;

  RankTableServer out;
  for (const auto& [key, field] : value.get_ref<const Json::object_t&>()) {
    const std::string at = child(pointer, key);
    if (key == "server_id") out.server_id = server_id(field, at);
    else if (key == "device") out.devices = devices(field, at, name, multi_server);
    else if (key == "host_ip") out.host_ip = string_value(field, at);
    else if (key == "container_ip") out.container_ip = string_value(field, at);
  }
  const auto by_rank = [](const auto& a, const auto& b) { return a.rank_id < b.rank_id; };
  // devices is never empty here: "device" is required and checked non-empty.
  out.rank_start = std::min_element(out.devices.begin(), out.devices.end(), by_rank)->rank_id;
  return out;
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

std::vector<RankTableDevice> Checker::devices(const Json& list, const std::string& pointer,
                                              const std::string& server_name,
                                              bool multi_server) const {
  if (!list.is_array()) fail(Kind::shape, pointer, "expected an array, got " + describe(list));
  if (list.empty()) {
    fail(Kind::bad_value, pointer, fmt::format("server {} has no devices", server_name));
  }
  std::vector<RankTableDevice> out;
  for (std::size_t j = 0; j < list.size(); ++j) {
    out.push_back(device(list[j], child(pointer, j), multi_server));
  }
  return out;
}

RankTableDevice Checker::device(const Json& value, const std::string& pointer,
                                bool multi_server) const {
  if (!value.is_object()) fail(Kind::shape, pointer, "expected an object, got " + describe(value));
  require(value, pointer, {"device_id", "rank_id"});
  // Ranks on different servers reach each other through the device IPs.
  if (multi_server && !value.contains("device_ip")) {
    fail(Kind::missing, child(pointer, "device_ip"),
         "device_ip is required when the table has more than one server");
  }
  RankTableDevice out;
  for (const auto& [key, field] : value.get_ref<const Json::object_t&>()) {
    const std::string at = child(pointer, key);
    if (key == "device_id") out.device_id = table_integer(field, at);
    else if (key == "rank_id") out.rank_id = table_integer(field, at);
    else if (key == "device_ip") out.device_ip = device_ip(field, at);
  }
  return out;
}

std::string Checker::device_ip(const Json& value, const std::string& pointer) const {
  const std::string& ip = string_value(value, pointer);
  if (ip == ip_placeholder) {
    fail(Kind::bad_value, pointer,
         describe(value) + " is not an IP address (the placeholder a node writes when its NPU "
                           "network is not configured)");
  }
  if (!canonical_ip(ip)) {
    fail(Kind::bad_value, pointer,
         describe(value) + " is not an IP address (expected an IPv4 or IPv6 literal)");
  }
  return ip;
}

// Each duplicate is reported at its second occurrence, naming the first.
void Checker::check_unique(const RankTable& table) const {
  FirstSeen<std::string> server_ids;
  for (std::size_t i = 0; i < table.servers.size(); ++i) {
    const std::string& id = table.servers[i].server_id;
    const std::string at = fmt::format("/server_list/{}/server_id", i);
    if (const auto first = server_ids.repeat(id, at)) {
      fail(Kind::duplicate, at, fmt::format("server {} listed twice (also at {})", id, *first));
    }
  }
  for (std::size_t i = 0; i < table.servers.size(); ++i) {
    FirstSeen<int> device_ids;
    const auto& server = table.servers[i];
    for (std::size_t j = 0; j < server.devices.size(); ++j) {
      const int id = server.devices[j].device_id;
      const std::string at = device_pointer(i, j, "device_id");
      if (device_ids.repeat(id, at)) {
        fail(Kind::duplicate, at,
             fmt::format("device {} listed twice on server {}", id, server.server_id));
      }
    }
  }
  FirstSeen<int> ranks;
  for_each_device(table, [&](std::size_t i, std::size_t j, const RankTableDevice& device) {
    const std::string at = device_pointer(i, j, "rank_id");
    if (const auto first = ranks.repeat(device.rank_id, at)) {
      fail(Kind::duplicate, at,
           fmt::format("rank {} appears twice (also at {})", device.rank_id, *first));
    }
  });
  FirstSeen<std::string> ips;  // compared in normalized form: "fe80::1" is "fe80:0::1"
  for_each_device(table, [&](std::size_t i, std::size_t j, const RankTableDevice& device) {
    if (!device.device_ip) return;
    const std::string at = device_pointer(i, j, "device_ip");
    if (const auto first = ips.repeat(canonical_ip(*device.device_ip).value_or(""), at)) {
      fail(Kind::duplicate, at, fmt::format("device_ip {} appears twice (also at {})",
                                            describe(Json(*device.device_ip)), *first));
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
    if (device.rank_id < n) present[static_cast<std::size_t>(device.rank_id)] = true;
    else out_of_range.push_back(device.rank_id);
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

// ---------------------------------------------------------------------------
// Reading the file.

std::string read_file(const std::string& path) {
  const auto io_error = [&](std::string_view what, int error) {
    return RankTableError(Kind::io, path, std::nullopt,
                          fmt::format("{}: {}", what, std::strerror(error)));
  };
  const auto too_large = [&] {
    return RankTableError(Kind::io, path, std::nullopt,
                          fmt::format("file is larger than {} MiB; not a rank table",
                                      max_file_bytes >> 20));
  };
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
  const detail::UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!file) throw io_error("cannot open the rank table", errno);
  const int fd = file.get();

  struct stat info {};
  if (::fstat(fd, &info) != 0) throw io_error("cannot stat the rank table", errno);
  if (S_ISDIR(info.st_mode)) {
    throw io_error("cannot read the rank table (expected the table's .json file)", EISDIR);
  }
  if (!S_ISREG(info.st_mode)) {
    throw RankTableError(Kind::io, path, std::nullopt,
                         "cannot read the rank table: not a regular file (pipe, device or socket)");
  }
  if (static_cast<std::uintmax_t>(info.st_size) > max_file_bytes) throw too_large();

  std::string text;
  text.reserve(static_cast<std::size_t>(info.st_size));
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw io_error("cannot read the rank table", errno);
    if (n == 0) break;
    // Checked again here: the file may grow while it is read.
    if (text.size() + static_cast<std::size_t>(n) > max_file_bytes) throw too_large();
    text.append(buffer, static_cast<std::size_t>(n));
  }
  return text;
}

}  // namespace

RankTable parse_rank_table(std::string_view text, const std::string& source) {
  const Checker checker(source);
  const std::size_t skipped = text.substr(0, utf8_bom.size()) == utf8_bom ? utf8_bom.size() : 0;
  if (text.find_first_not_of(json_whitespace, skipped) == std::string_view::npos) {
    checker.fail(Kind::empty, std::nullopt, "empty file");
  }
  const Json doc = checker.parse(text, skipped);
  try {
    return checker.check(doc);
  } catch (const Json::exception& e) {
    // Every value's type is tested before it is read, so this would be a bug;
    // still report a bad table rather than let a library exception escape.
    checker.fail(Kind::shape, std::nullopt, std::string("cannot read the table: ") + e.what());
  }
}

RankTable load_rank_table(const std::string& path) {
  return parse_rank_table(read_file(path), path);
}

}  // namespace davincirun
