// The names of an enum's values, from one table per enum (like systemd's
// string tables): to_string(), parsing, validity and the list of names all
// read it, so that a value and its name cannot drift apart.
//
//   enum class Color { red, green };
//   DAVINCIRUN_ENUM_NAMES(Color, "red", "green");   // to_string(Color), enum_parse<Color>("red")
//
// The table is found by argument-dependent lookup: declare it at namespace
// scope in the enum's namespace, after the enum (after the class, for an
// enum declared inside one). Values must be consecutive: the first (0, or
// the one DAVINCIRUN_ENUM_NAMES_FROM gives), then one name per value in order.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace davincirun {

/// One enum's table: the first value and one name per value from there.
template <typename E, std::size_t N>
struct EnumNames {
  std::underlying_type_t<E> first;
  std::array<const char*, N> names;
};

template <typename E, typename... Names>
constexpr EnumNames<E, sizeof...(Names)> make_enum_names(std::underlying_type_t<E> first, Names... names) {
  return {first, {{names...}}};
}

/// The table of `E` (DAVINCIRUN_ENUM_NAMES).
template <typename E>
inline constexpr auto enum_names = davincirun_enum_names(E{});

/// How many values `E` has.
template <typename E>
constexpr std::size_t enum_count() noexcept {
  return enum_names<E>.names.size();
}

/// Whether `value` (an underlying value, e.g. read from the wire) is one of E's.
template <typename E>
constexpr bool enum_valid(long long value) noexcept {
  const long long first = enum_names<E>.first;
  return value >= first && value < first + static_cast<long long>(enum_count<E>());
}

/// The name of `value`; "?" for a value outside the table.
template <typename E>
const char* enum_name(E value) noexcept {
  const auto v = static_cast<long long>(value);
  return enum_valid<E>(v) ? enum_names<E>.names[static_cast<std::size_t>(v - enum_names<E>.first)] : "?";
}

/// The value named `text`; nullopt for any other text.
template <typename E>
std::optional<E> enum_parse(std::string_view text) noexcept {
  for (std::size_t i = 0; i < enum_count<E>(); ++i) {
    if (text == enum_names<E>.names[i]) return static_cast<E>(enum_names<E>.first + static_cast<long long>(i));
  }
  return std::nullopt;
}

/// Every name, for messages: "a, b or c".
template <typename E>
std::string enum_choices(const char* last = " or ") {
  std::string out;
  for (std::size_t i = 0; i < enum_count<E>(); ++i) {
    if (i > 0) out += i + 1 == enum_count<E>() ? last : ", ";
    out += enum_names<E>.names[i];
  }
  return out;
}

}  // namespace davincirun

/// Declares the names of `Enum`'s values 0, 1, ... and its to_string()
/// (maybe unused: an enum of one file may need only the wire's range check).
#define DAVINCIRUN_ENUM_NAMES(Enum, ...) DAVINCIRUN_ENUM_NAMES_FROM(Enum, 0, __VA_ARGS__)

/// The same for an enum whose first value is `first_value`.
#define DAVINCIRUN_ENUM_NAMES_FROM(Enum, first_value, ...)                                                             \
  constexpr auto davincirun_enum_names(Enum) { return ::davincirun::make_enum_names<Enum>(first_value, __VA_ARGS__); } \
  [[maybe_unused]] inline const char* to_string(Enum value) noexcept { return ::davincirun::enum_name(value); }
