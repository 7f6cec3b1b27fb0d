// Rank table parser: reading the JSON text. Limits nesting and keys and
// refuses a repeated key while the text is read, and turns nlohmann's
// syntax errors into RankTableErrors with a line, a column and a byte offset.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "rank_table/rank_table_checker.hpp"

namespace davincirun::detail {

namespace {

constexpr int max_nesting = 64;  // a rank table nests 7 deep; bounds memory on hostile input
// A rank table object has about a dozen keys. Inserting a key costs a linear
// search (here and in nlohmann's ordered_map), so this bounds the time a
// hostile file of many keys takes (quadratic in the keys of one object).
constexpr std::size_t max_keys = 256;

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
      case Json::parse_event_t::key: add_key(level - 1, parsed.get_ref<const std::string&>()); break;
      case Json::parse_event_t::value: begin_element(level); break;
      default:  // a closed container's frame is reused by the next one at its depth
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool object = false;
    std::size_t elements = 0;       // an array's elements begun so far
    std::vector<std::string> keys;  // an object's keys so far; the last is being read
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
  bool parse_error(std::size_t position, const std::string& token, const Json::exception& e) override {
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
    // nlohmann reports an error at the first byte that cannot continue the
    // document, and one past the end when the text ran out first: then the
    // text is a prefix (of a file still being written). NUL bytes at the end
    // count as not yet written (a file extended before its bytes arrive).
    const std::size_t written = file.find_last_not_of('\0') + 1;  // 0 when all NUL
    syntax_error(file, skipped, offset, nul ? "unexpected NUL byte" : short_reason(e.what()), offset >= written);
  } catch (const Json::out_of_range&) {  // a number beyond a double's range, e.g. 1e400
    OverflowFinder finder;
    Json::sax_parse(file.begin(), file.end(), &finder);
    if (!finder.start) fail(Kind::syntax, std::nullopt, "not valid JSON: a number is out of range");
    syntax_error(file, skipped, *finder.start, fmt::format("number {} is out of range", shorten(finder.number)));
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
void Checker::syntax_error(std::string_view file, std::size_t skipped, std::size_t offset, std::string_view reason,
                           bool unfinished) const {
  offset = std::clamp(offset, skipped, file.size());
  const std::string_view before = file.substr(skipped, offset - skipped);
  const auto line = 1 + std::count(before.begin(), before.end(), '\n');
  const std::size_t newline = before.rfind('\n');
  const std::size_t line_start = newline == std::string_view::npos ? 0 : newline + 1;
  std::string detail = fmt::format("not valid JSON at line {}, column {} (byte {}): {}", line,
                                   before.size() - line_start + 1, offset, reason);
  if (unfinished) throw UnfinishedJson(Kind::syntax, source_, std::nullopt, std::move(detail));
  fail(Kind::syntax, std::nullopt, std::move(detail));
}

}  // namespace davincirun::detail
