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

constexpr std::size_t max_nesting = 64;  // a rank table nests 7 deep; bounds memory on hostile input
// A rank table object has about a dozen keys. Each key is looked for among
// the keys before it, so this bounds the time a hostile file of many keys
// takes (quadratic in the keys of one object).
constexpr std::size_t max_keys = 256;

// Thrown by the builder to stop reading a document nested deeper than any
// rank table, before it can use much memory.
struct TooDeep {};

// Thrown by the builder at the second occurrence of a key in one object, of
// which nlohmann would silently keep one value.
struct RepeatedKey {
  std::string pointer;
  std::string key;
};

// Thrown by the builder at key max_keys + 1 of one object.
struct TooManyKeys {
  std::string pointer;  // of the object
};

// Where nlohmann's reader stopped on bad input.
struct ReadError {
  std::size_t position = 0;  // bytes read, the offending one included (one past the end at end of input)
  std::string token;         // the last token read
  int id = 0;                // nlohmann's error id: 101... syntax, 406 a number beyond a double's range
  std::string what;
};

// Builds the document from nlohmann's SAX events, checking the limits and
// refusing repeated keys as the text is read. Each container is made when it
// ends, at its final size, from members kept in a reused frame: nlohmann's
// own builder grows every object one key at a time, which costs a table of
// 65,536 devices a third of its reading time.
class DocumentBuilder {
 public:
  using string_t = Json::string_t;
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using binary_t = Json::binary_t;

  Json document;
  std::optional<ReadError> error;

  bool null() { return put(Json()); }
  bool boolean(bool value) { return put(Json(value)); }
  bool number_integer(number_integer_t value) { return put(Json(value)); }
  bool number_unsigned(number_unsigned_t value) { return put(Json(value)); }
  bool number_float(number_float_t value, const string_t&) { return put(Json(value)); }
  bool string(string_t& value) { return put(Json(std::move(value))); }
  bool binary(binary_t& value) { return put(Json::binary(std::move(value))); }  // not in JSON text
  bool start_object(std::size_t) { return open(true); }
  bool start_array(std::size_t) { return open(false); }
  bool key(string_t& key) {
    Frame& frame = frames_[open_ - 1];
    for (const auto& member : frame.members) {
      if (member.first == key) throw RepeatedKey{child(pointer_to(open_ - 1), key), key};
    }
    if (frame.members.size() == max_keys) throw TooManyKeys{pointer_to(open_ - 1)};
    frame.key = std::move(key);
    return true;
  }
  bool end_object() {
    Frame& frame = frames_[--open_];
    Json object(Json::value_t::object);
    auto& members = object.get_ref<Json::object_t&>();
    members.reserve(frame.members.size());
    for (auto& [key, value] : frame.members) members.emplace_back(std::move(key), std::move(value));
    frame.members.clear();
    return put(std::move(object));
  }
  bool end_array() {
    Frame& frame = frames_[--open_];
    Json array(Json::value_t::array);
    auto& elements = array.get_ref<Json::array_t&>();
    elements.reserve(frame.elements.size());
    for (auto& value : frame.elements) elements.push_back(std::move(value));
    frame.elements.clear();
    return put(std::move(array));
  }
  bool parse_error(std::size_t position, const std::string& token, const Json::exception& e) {
    error = ReadError{position, token, e.id, e.what()};
    return false;
  }

 private:
  struct Frame {
    bool object = false;
    std::vector<std::pair<std::string, Json>> members;  // an object's, so far
    std::string key;                                    // of the member being read
    std::vector<Json> elements;                         // an array's, so far
  };

  // Frames are cleared rather than freed, so their buffers serve the next
  // container at their depth.
  bool open(bool object) {
    if (open_ == max_nesting) throw TooDeep{};
    if (frames_.size() == open_) frames_.emplace_back();
    frames_[open_++].object = object;
    return true;
  }

  bool put(Json&& value) {
    if (open_ == 0) {
      document = std::move(value);
      return true;
    }
    Frame& frame = frames_[open_ - 1];
    if (frame.object) {
      frame.members.emplace_back(std::move(frame.key), std::move(value));
    } else {
      frame.elements.push_back(std::move(value));
    }
    return true;
  }

  // The pointer of the container open at `level` (0: the document).
  std::string pointer_to(std::size_t level) const {
    std::string pointer;
    for (std::size_t i = 0; i < level; ++i) {
      const Frame& outer = frames_[i];
      pointer = outer.object ? child(pointer, outer.key) : child(pointer, outer.elements.size());
    }
    return pointer;
  }

  std::vector<Frame> frames_;  // one per container open (and more, kept for reuse), outermost first
  std::size_t open_ = 0;       // containers open
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

// Reads `text` (a BOM is skipped by nlohmann itself) into `builder`; false
// when the text is not JSON (builder.error says where). The limits throw.
bool read_document(std::string_view text, DocumentBuilder& builder) {
  return Json::sax_parse(text.begin(), text.end(), &builder) && !builder.error;
}

}  // namespace

std::optional<std::string> top_level_status(std::string_view text) {
  try {
    DocumentBuilder builder;
    if (!read_document(text, builder)) return std::nullopt;
    const Json& doc = builder.document;
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
Json Checker::parse(std::string_view file, std::size_t skipped) {
  text_bytes_ = file.size();
  DocumentBuilder builder;
  bool read = false;
  try {
    read = read_document(file, builder);
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
  if (read) {
    // nlohmann takes a NUL byte for the end of the input and ignores what follows it.
    if (const auto nul = file.find('\0'); nul != std::string_view::npos) {
      syntax_error(file, skipped, nul, "unexpected NUL byte");
    }
    return std::move(builder.document);
  }
  if (!builder.error) fail(Kind::syntax, std::nullopt, "not valid JSON");  // sax_parse stops only through parse_error
  const ReadError& e = *builder.error;
  if (e.id == 406 && e.token.size() <= e.position) {  // a number beyond a double's range; its token is ASCII
    syntax_error(file, skipped, e.position - e.token.size(),
                 fmt::format("number {} is out of range", shorten(e.token)));
  }
  // The position counts the bytes read, the offending one included.
  const std::size_t offset = e.position == 0 ? 0 : e.position - 1;
  const bool nul = offset < file.size() && file[offset] == '\0';
  // nlohmann reports an error at the first byte that cannot continue the
  // document, and one past the end when the text ran out first: then the
  // text is a prefix (of a file still being written). NUL bytes at the end
  // count as not yet written (a file extended before its bytes arrive).
  const std::size_t written = file.find_last_not_of('\0') + 1;  // 0 when all NUL
  syntax_error(file, skipped, offset, nul ? "unexpected NUL byte" : short_reason(e.what), offset >= written);
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
