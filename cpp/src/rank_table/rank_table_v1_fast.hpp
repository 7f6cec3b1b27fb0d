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

/// The normalized text of a table read from `top` (nlohmann's layout, as
/// normalized_v1 writes it); `expected`: about how long it will be. Throws
/// NotPlain at a repeated key, more than max_keys keys or a floating-point number.
std::string write_normalized(dom::object top, const RankTable& table, bool v1_2, std::size_t expected);

}  // namespace davincirun::detail::fast
