// The normalized text of a table the fast reader read (rank_table_v1_fast.cpp),
// written straight from simdjson's document, byte for byte as normalized_v1
// (rank_table_writer.cpp) has nlohmann write it: the fuzzer and
// tests/cpp/test_rank_table_fast.cpp compare the two.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>

#include "rank_table/rank_table_v1_fast.hpp"

namespace davincirun::detail::fast {

namespace {

// Whether `text` holds a quote, a backslash or a control character: eight
// bytes a step (a byte b is below 0x20 when (b - 0x20) borrows from its high
// bit while b's own is clear; equal to c when b ^ c is below 1).
bool needs_escape(std::string_view text) {
  constexpr std::uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
  const auto below = [](std::uint64_t w, std::uint64_t n) { return (w - ones * n) & ~w & highs; };
  std::size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, text.data() + i, 8);
    if (below(w, 0x20) | below(w ^ (ones * '"'), 1) | below(w ^ (ones * '\\'), 1)) return true;
  }
  for (; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == '"' || c == '\\') return true;
  }
  return false;
}

// Writes the normalized text (one walk of the document, beside the table
// reader's on large tables) exactly as normalized_v1 has
// nlohmann write it: indented by 2, "key": value, scalars of the table as
// decimal strings, status and server_count added where absent.
class NormalizedWriter {
 public:
  NormalizedWriter(bool v1_2, std::size_t expected) : v1_2_(v1_2) {
    out_.resize(expected);  // written by put(), cut to the text's end at last
  }

  std::string write(dom::object top) && {
    const bool has_status = member(top, "status").has_value();
    const bool has_count = member(top, "server_count").has_value();
    // What the table reader reads from the same values (it refuses what is not so).
    const std::string servers = std::to_string(count(as_list(required(top, "server_list"))));
    put("{\n");
    bool first = true;
    std::size_t keys = 0;
    if (!has_status) {
      key(first, 2, "status");
      quoted("completed");
    }
    for (const dom::key_value_pair field : top) {
      distinct(top, keys++, field.key);
      key(first, 2, field.key);
      if (field.key == "server_count")
        quoted(servers);
      else if (field.key == "server_list")
        server_list(field.value);
      else if (field.key == "super_pod_list" && v1_2_)
        super_pod_list(field.value);
      else
        value(field.value, 2);
      if (field.key == "version" && !has_count) {
        key(first, 2, "server_count");
        quoted(servers);
      }
    }
    put("\n}");
    out_.resize(end_);
    return std::move(out_);
  }

 private:
  // Appends, without std::string's bookkeeping per call (a 65,536-rank
  // table is ~1.3 million small pieces): out_ is sized ahead, end_ is where
  // the text ends.
  void put(std::string_view piece) {
    if (out_.size() - end_ < piece.size()) out_.resize(std::max(out_.size() * 2, end_ + piece.size()));
    std::memcpy(&out_[end_], piece.data(), piece.size());
    end_ += piece.size();
  }
  void put(char c) { put(std::string_view(&c, 1)); }

  // The thorough reader refuses a repeated key, and more than max_keys in an
  // object: `key` is key number `index` of the object `members`, compared
  // with the ones before it (objects of a rank table have a few keys).
  static void distinct(dom::object members, std::size_t index, std::string_view key) {
    if (index == max_keys) not_plain();
    std::size_t k = 0;
    for (const dom::key_value_pair earlier : members) {
      if (k++ == index) return;
      if (earlier.key == key) not_plain();
    }
  }

  void indent(std::size_t depth) {
    static constexpr std::string_view spaces = "                                                                ";
    while (depth > spaces.size()) {
      put(spaces);
      depth -= spaces.size();
    }
    put(spaces.substr(0, depth));
  }

  void key(bool& first, std::size_t depth, std::string_view name) {
    if (!first) put(",\n");
    first = false;
    indent(depth);
    quoted(name);
    put(": ");
  }

  // Escaped as nlohmann writes strings (ensure_ascii off): the quote, the
  // backslash and control characters only, those without a short form as
  // \u00xx in lowercase hex; everything else, UTF-8 included, as it is.
  void quoted(std::string_view text) {
    put('"');
    if (!needs_escape(text)) {
      put(text);
      put('"');
      return;
    }
    std::size_t plain = 0;  // of text, written
    for (std::size_t i = 0; i < text.size(); ++i) {
      const auto c = static_cast<unsigned char>(text[i]);
      if (c >= 0x20 && c != '"' && c != '\\') continue;
      put(text.substr(plain, i - plain));
      plain = i + 1;
      switch (c) {
        case '"': put("\\\""); break;
        case '\\': put("\\\\"); break;
        case '\b': put("\\b"); break;
        case '\f': put("\\f"); break;
        case '\n': put("\\n"); break;
        case '\r': put("\\r"); break;
        case '\t': put("\\t"); break;
        default: {
          constexpr char hex[] = "0123456789abcdef";
          put("\\u00");
          put(hex[c >> 4]);
          put(hex[c & 15]);
        }
      }
    }
    put(text.substr(plain));
    put('"');
  }

  template <typename Integer>
  void number(Integer n) {
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof digits, n).ptr;
    put(std::string_view(digits, static_cast<std::size_t>(end - digits)));
  }

  // Containers open at `depth` (their members at depth + 2); calls
  // each(element) or each(member) between the separators.
  template <typename Each>
  void array(dom::array list, std::size_t depth, Each&& each) {
    if (list.begin() == list.end()) {
      put("[]");
      return;
    }
    put("[\n");
    bool first = true;
    for (const dom::element element : list) {
      if (!first) put(",\n");
      first = false;
      indent(depth + 2);
      each(element);
    }
    put('\n');
    indent(depth);
    put(']');
  }

  template <typename Each>
  void object(dom::object members, std::size_t depth, Each&& each) {
    if (members.begin() == members.end()) {
      put("{}");
      return;
    }
    put("{\n");
    bool first = true;
    std::size_t index = 0;
    for (const dom::key_value_pair field : members) {
      distinct(members, index++, field.key);
      key(first, depth + 2, field.key);
      each(field);
    }
    put('\n');
    indent(depth);
    put('}');
  }

  void value(dom::element v, std::size_t depth) {
    switch (v.type()) {
      case Type::OBJECT:
        object(object_of(v), depth, [&](const dom::key_value_pair& field) { value(field.value, depth + 2); });
        return;
      case Type::ARRAY: array(array_of(v), depth, [&](dom::element element) { value(element, depth + 2); }); return;
      case Type::STRING: quoted(string_of(v)); return;
      case Type::INT64: number(v.get_int64().value_unsafe()); return;
      case Type::UINT64: number(v.get_uint64().value_unsafe()); return;
      case Type::BOOL: put(v.get_bool().value_unsafe() ? "true" : "false"); return;
      case Type::NULL_VALUE: put("null"); return;
      case Type::DOUBLE: not_plain();  // how nlohmann writes one is not worth copying
    }
  }

  void server_list(dom::element list) {
    array(as_list(list), 2, [&](dom::element server) {
      object(as_object(server), 4, [&](const dom::key_value_pair& field) {
        if (field.key == "device") {
          devices(field.value);
        } else {
          value(field.value, 6);
        }
      });
    });
  }

  // Integers as decimal strings ("007" and 7 as "7").
  void devices(dom::element list) {
    array(as_list(list), 6, [&](dom::element device) {
      object(as_object(device), 8, [&](const dom::key_value_pair& field) {
        if (field.key == "device_id" || field.key == "rank_id") {
          quoted_number(table_integer(field.value, max_table_integer));
        } else if (field.key == "super_device_id" && v1_2_) {
          quoted_number(table_integer(field.value, max_super_device_id));
        } else {
          value(field.value, 10);
        }
      });
    });
  }

  void super_pod_list(dom::element list) {
    array(as_list(list), 2, [&](dom::element pod) {
      object(as_object(pod), 4, [&](const dom::key_value_pair& field) {
        if (field.key == "super_pod_id") {
          // An integer as its digits, a string as it is.
          if (field.value.type() == Type::INT64) {
            quoted_number(table_integer(field.value, max_super_device_id));
          } else {
            quoted(as_string(field.value));
          }
        } else {
          value(field.value, 6);
        }
      });
    });
  }

  template <typename Integer>
  void quoted_number(Integer n) {
    put('"');
    number(n);
    put('"');
  }

  bool v1_2_;
  std::string out_;
  std::size_t end_ = 0;  // of the text in out_
};

}  // namespace

std::optional<std::string> write_normalized(dom::object top, bool v1_2, std::size_t expected) {
  try {
    return NormalizedWriter(v1_2, expected).write(top);
  } catch (const NotPlain&) {
    return std::nullopt;
  }
}

}  // namespace davincirun::detail::fast
