// The fast reader of plain 1.0 and 1.2 tables: simdjson's document (a 65,536-
// rank table in a few milliseconds, where nlohmann's reader alone takes
// 26 ms), the RankTable and the normalized text made straight from it.
//
// It accepts only what the thorough reader (rank_table_json.cpp,
// rank_table.cpp) accepts, and gives the same table and text: anything else
// (another format, a problem of any kind, a warning, or anything rare enough
// not to be worth a second writer: floating-point numbers, nesting beyond 32)
// makes it return nullopt, and the thorough reader reads the text and words
// what it finds. The fuzzer compares the two on every input
// (tests/fuzz/fuzz_rank_table.cpp). Two walks of the document, side by side
// on large tables: reading the table (then the table-wide rules, shared with
// the thorough reader), and writing the normalized text
// (rank_table_v1_normalized.cpp), which visits every value and so also
// refuses what only the thorough reader words (repeated keys, floating point).
#include <algorithm>
#include <exception>
#include <string>
#include <system_error>
#include <thread>

#include "common/ip_address.hpp"
#include "common/prefault.hpp"
#include "common/wide_hash.hpp"
#include "rank_table/rank_table_checker.hpp"
#include "rank_table/rank_table_v1_fast.hpp"

namespace davincirun::detail {

namespace {

namespace dom = fast::dom;
using fast::as_list;
using fast::as_object;
using fast::as_string;
using fast::count;
using fast::not_plain;
using fast::NotPlain;
using fast::object_of;
using fast::required;
using fast::table_integer;
using fast::Type;

int small_integer(dom::element value) { return static_cast<int>(table_integer(value, max_table_integer)); }

std::string server_id(dom::element value) {
  const std::string_view id = as_string(value);
  if (id.empty() || id.size() > max_server_id_bytes) not_plain();
  return std::string(id);
}

// Reads the table from the document, as Checker::check_v1 does.
class TableReader {
 public:
  explicit TableReader(bool v1_2) : v1_2_(v1_2) {}

  RankTable read(dom::object top, std::optional<int>& server_count) {
    RankTable table;
    table.status = "completed";
    required(top, "server_list");
    for (const dom::key_value_pair field : top) {
      if (field.key == "server_count")
        server_count = small_integer(field.value);
      else if (field.key == "status")
        table.status = as_string(field.value);
      else if (field.key == "server_list")
        table.servers = servers(field.value);
      else if (field.key == "super_pod_list" && v1_2_)
        table.super_pods = super_pods(field.value);
    }
    for (const auto& server : table.servers) table.world_size += static_cast<int>(server.devices.size());
    return table;
  }

  bool multi_server() const { return multi_server_; }
  /// address_bytes() of every device_ip read, in table order (check_unique's keys).
  const std::vector<IpKey>& ip_keys() const { return ip_keys_; }

 private:
  std::vector<RankTableServer> servers(dom::element value) {
    const dom::array list = as_list(value);
    multi_server_ = count(list) > 1;
    std::vector<RankTableServer> out;
    out.reserve(count(list));
    for (const dom::element element : list) out.push_back(server(as_object(element)));
    return out;
  }

  RankTableServer server(dom::object object) {
    required(object, "server_id");
    required(object, "device");
    RankTableServer out;
    for (const dom::key_value_pair field : object) {
      if (field.key == "server_id")
        out.server_id = server_id(field.value);
      else if (field.key == "device")
        out.devices = devices(field.value);
      else if (field.key == "host_ip")
        out.host_ip = as_string(field.value);
      else if (field.key == "container_ip")
        out.container_ip = as_string(field.value);
    }
    out.rank_start = std::min_element(out.devices.begin(), out.devices.end(), [](const auto& a, const auto& b) {
                       return a.rank_id < b.rank_id;
                     })->rank_id;
    return out;
  }

  std::vector<RankTableDevice> devices(dom::element value) {
    const dom::array list = as_list(value);
    std::vector<RankTableDevice> out;
    out.reserve(count(list));
    // Filled in place: a device is 112 bytes, and moving each into place costs more than filling it.
    for (const dom::element element : list) device(as_object(element), out.emplace_back());
    return out;
  }

  void device(dom::object object, RankTableDevice& out) {
    // Required: device_id, rank_id; in 1.2 super_device_id; between servers device_ip.
    bool device_id = false, rank_id = false;
    for (const dom::key_value_pair field : object) {
      if (field.key == "device_id") {
        out.device_id = small_integer(field.value);
        device_id = true;
      } else if (field.key == "rank_id") {
        out.rank_id = small_integer(field.value);
        rank_id = true;
      } else if (field.key == "device_ip") {
        // The placeholder is a warning or an error: the thorough reader's to give.
        const std::string_view ip = as_string(field.value);
        // A repeated key is the thorough reader's to word (and ip_keys_ would not match the table).
        if (out.device_ip || ip == ip_placeholder || ip.find('%') != std::string_view::npos) not_plain();
        const auto key = address_bytes(ip);
        if (!key) not_plain();
        ip_keys_.push_back(*key);
        out.device_ip.emplace(ip);
      } else if (field.key == "super_device_id" && v1_2_) {
        out.super_device_id = table_integer(field.value, max_super_device_id);
      }
    }
    if (!device_id || !rank_id || (v1_2_ && !out.super_device_id) || (multi_server_ && !out.device_ip)) not_plain();
  }

  std::vector<RankTableSuperPod> super_pods(dom::element value) const {
    std::vector<RankTableSuperPod> out;
    for (const dom::element element : as_list(value)) {
      const dom::object object = as_object(element);
      required(object, "super_pod_id");
      required(object, "server_list");
      RankTableSuperPod pod;
      for (const dom::key_value_pair field : object) {
        if (field.key == "super_pod_id") {
          if (field.value.type() == Type::INT64) {
            pod.super_pod_id = std::to_string(table_integer(field.value, max_super_device_id));
            continue;
          }
          const std::string_view id = as_string(field.value);
          if (id.empty() || id.size() > max_super_pod_id_bytes) not_plain();
          pod.super_pod_id = id;
        } else if (field.key == "server_list") {
          for (const dom::element entry : as_list(field.value)) {
            pod.server_ids.push_back(server_id(required(as_object(entry), "server_id")));
          }
        }
      }
      out.push_back(std::move(pod));
    }
    return out;
  }

  bool v1_2_;
  bool multi_server_ = false;
  std::vector<IpKey> ip_keys_;
};

// Texts from this size on are written on a second thread (a thread costs ~50 us).
constexpr std::size_t parallel_bytes = std::size_t{1} << 20;

// Runs write() (the normalized text; nullopt: not plain) on a second thread
// when `parallel`, and read() (the table, then the table-wide rules; nullopt:
// not plain; throws what the rules throw) on this one: they share only the
// document, which both only read. Anything not plain decides first (the
// thorough reader words it, before any rule would), then what the rules threw.
template <typename Write, typename Read>
std::optional<RankTable> read_beside(bool parallel, Write write, Read read) {
  std::optional<std::string> text;
  std::exception_ptr write_error;
  const auto writing = [&] {
    try {
      text = write();
    } catch (...) {  // out of memory
      write_error = std::current_exception();
    }
  };
  std::optional<std::thread> writer;
  bool threaded = false;
  if (parallel) {
    try {
      writer.emplace(writing);
      threaded = true;
    } catch (const std::system_error&) {
      threaded = false;  // no thread to be had: one after the other
    }
  }
  std::optional<RankTable> table;
  std::exception_ptr read_error;
  try {
    table = read();
  } catch (...) {
    read_error = std::current_exception();
  }
  const bool handed_over = !table && !read_error;
  if (threaded) {
    writer->join();
  } else if (!handed_over) {
    writing();
  }
  if (write_error) std::rethrow_exception(write_error);
  if (handed_over || !text) return std::nullopt;       // not plain: the thorough reader's to word
  if (read_error) std::rethrow_exception(read_error);  // a table-wide rule broken
  if (table) table->normalized_json = std::move(*text);
  return table;
}

}  // namespace

std::optional<RankTable> Checker::read_v1_fast(std::string_view json, bool padded) {
  dom::parser parser;
  dom::element document;
  // The document is allocated here rather than inside parse(), to prefault it.
  if (parser.allocate(json.size(), fast::max_depth) != simdjson::SUCCESS ||
      parser.doc.allocate(json.size()) != simdjson::SUCCESS) {
    return std::nullopt;
  }
  // What parsing fills of the buffers, per byte of an indented table (a
  // 65,536-rank one: 0.48 in structural indexes, 0.55 in tape, 0.6 in
  // strings), faulted in on the other core meanwhile (4 of the parse's 9 ms
  // here). Where a table fills more (no indentation), the rest faults in as
  // written. Not the normalized text's buffer too: no faster, measured.
  const std::size_t n = json.size();
  {
    const Prefault prefault({{parser.implementation->structural_indexes.get(), n / 2},
                             {parser.doc.tape.get(), n * 9 / 16},
                             {parser.doc.string_buf.get(), n * 5 / 8}});
    if (parser.parse(json.data(), json.size(), !padded).get(document) != simdjson::SUCCESS ||
        document.type() != Type::OBJECT) {
      return std::nullopt;
    }
  }  // the prefaulting stops: the table is read and written on both cores from here
  const dom::object top = object_of(document);
  try {
    const std::string_view version = as_string(required(top, "version"));
    if (version != "1.0" && version != "1.2") return std::nullopt;
    const bool v1_2 = version == "1.2";
    format_ = v1_2 ? RankTableFormat::v1_2 : RankTableFormat::v1_0;
    std::optional<std::uint64_t> hash;  // of the text, on the writer's thread, beside the table's rules
    std::optional<RankTable> read = read_beside(
        json.size() >= parallel_bytes,
        [&] {
          std::optional<std::string> text = fast::write_normalized(top, v1_2, n + n / 8 + 64);
          if (text) hash = wide_hash64(*text);
          return text;
        },
        [&]() -> std::optional<RankTable> {
          try {
            std::optional<int> server_count;
            TableReader reader(v1_2);
            RankTable table = reader.read(top, server_count);
            multi_server_ = reader.multi_server();
            check_v1_rules(table, server_count, &reader.ip_keys());  // what these throw, the thorough reader throws too
            table.format = format_;
            return table;
          } catch (const NotPlain&) {
            return std::nullopt;
          }
        });
    if (read) read->normalized_hash = hash;
    return read;
  } catch (const NotPlain&) {
    return std::nullopt;
  }
}

}  // namespace davincirun::detail
