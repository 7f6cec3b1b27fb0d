// The fast reader of plain 1.x tables, shared by its two files:
//   rank_table_v1_fast.cpp        reading the table (Checker::read_v1_fast);
//   rank_table_v1_normalized.cpp  writing its normalized text.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "davincirun/rank_table.hpp"

namespace davincirun::detail::fast {

namespace dom = simdjson::dom;
using Type = dom::element_type;

// Stricter than the thorough reader's 64 levels, and enough for any rank table (7).
inline constexpr std::size_t max_depth = 32;
inline constexpr std::size_t max_keys = 256;  // the thorough reader's limit per object

/// Thrown to give up on the fast path; never leaves it (Checker::read_v1_fast).
struct NotPlain {};

[[noreturn]] inline void not_plain() { throw NotPlain{}; }

/// A value of a known type (checked before: value_unsafe() is then safe).
inline dom::object object_of(dom::element value) { return value.get_object().value_unsafe(); }
inline dom::array array_of(dom::element value) { return value.get_array().value_unsafe(); }
inline std::string_view string_of(dom::element value) { return value.get_string().value_unsafe(); }

inline std::optional<dom::element> member(dom::object object, std::string_view key) {
  dom::element value;
  if (object.at_key(key).get(value) != simdjson::SUCCESS) return std::nullopt;
  return value;
}

inline dom::element required(dom::object object, std::string_view key) {
  const auto value = member(object, key);
  if (!value) not_plain();
  return *value;
}

inline dom::object as_object(dom::element value) {
  if (value.type() != Type::OBJECT) not_plain();
  return object_of(value);
}

// Its elements, never empty.
inline dom::array as_list(dom::element value) {
  if (value.type() != Type::ARRAY) not_plain();
  const dom::array list = array_of(value);
  if (list.begin() == list.end()) not_plain();
  return list;
}

inline std::size_t count(dom::array list) {
  constexpr std::size_t saturated = 0xFFFFFF;  // where dom::array::size() stops counting
  if (list.size() < saturated) return list.size();
  std::size_t n = 0;
  for ([[maybe_unused]] const dom::element element : list) ++n;
  return n;
}

inline std::string_view as_string(dom::element value) {
  if (value.type() != Type::STRING) not_plain();
  return string_of(value);
}

// Checker::table_integer's accepted cases: a JSON integer or a string of
// digits, 0..max.
inline std::int64_t table_integer(dom::element value, std::int64_t max) {
  if (value.type() == Type::INT64) {
    const std::int64_t number = value.get_int64().value_unsafe();
    if (number < 0 || number > max) not_plain();
    return number;
  }
  const std::string_view text = as_string(value);
  if (text.empty()) not_plain();
  std::int64_t number = 0;
  for (const char digit : text) {
    if (digit < '0' || digit > '9') not_plain();
    number = number * 10 + (digit - '0');
    if (number > max) not_plain();
  }
  return number;
}

/// The normalized text of the 1.x table `top` (nlohmann's layout, as
/// normalized_v1 writes it), made from the document alone, so that it can be
/// written while the table is read; `expected`: about how long it will be.
/// nullopt at a repeated key, more than max_keys keys in an object, a
/// floating-point number, or a value the table reader refuses too.
std::optional<std::string> write_normalized(dom::object top, bool v1_2, std::size_t expected);

}  // namespace davincirun::detail::fast
