// The binary encoding of values in the messages of the lifeline (launcher ↔
// supervisor process, job_protocol.hpp) and of the peer channel
// (peer_message.hpp): not JSON, since environment values, arguments and
// paths may be any bytes.
//
// Every value is typed on the wire: a type byte (WireType), then the value:
// integers little-endian and 8 bytes wide, texts length-prefixed, lists
// count-prefixed. A Reader checks each type byte, so reading fields in
// another order than they were written fails at the first one that differs,
// naming both types, instead of decoding garbage. put() and get() encode any
// value a field list (fields.hpp) is made of, in list order; every read is
// bounds-checked, every enum and integer range-checked.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "davincirun/enum_names.hpp"
#include "davincirun/fields.hpp"

namespace davincirun::detail {

/// The type byte in front of every value.
enum class WireType : std::uint8_t {
  u64 = 1,      ///< an unsigned integer
  i64,          ///< a signed integer
  flag,         ///< a bool: one byte
  str,          ///< a text: its length (8 bytes), then its bytes
  strs,         ///< texts: their count, then each as a str without its type byte
  opt_str,      ///< a flag byte, then a str without its type byte when set
  millis,       ///< a duration in milliseconds, signed
  time,         ///< a system_clock time in nanoseconds since the epoch, signed
  count,        ///< the length of a list whose elements follow, each typed
  enumeration,  ///< an enum's value
  optional,     ///< a flag byte, then the value (typed) when set
};
DAVINCIRUN_ENUM_NAMES_FROM(WireType, 1, "u64", "i64", "flag", "str", "strs", "opt_str", "millis", "time", "count",
                           "enum", "optional");

/// Appends typed values to a payload.
class Writer {
 public:
  void u64(std::uint64_t v);
  void i64(std::int64_t v);
  void flag(bool v);
  void str(std::string_view v);
  void strs(const std::vector<std::string>& v);
  void opt_str(const std::optional<std::string>& v);
  void millis(std::chrono::milliseconds v);
  void time(std::chrono::system_clock::time_point t);
  /// A list's length; its elements follow, each with its own type byte.
  void count(std::size_t n);
  void enumeration(std::uint64_t v);
  /// An optional's presence; its value follows when `present`.
  void optional(bool present);
  std::string take() { return std::move(out_); }

 private:
  void type(WireType t) { out_ += static_cast<char>(t); }
  void raw_u64(std::uint64_t v);
  void raw_str(std::string_view v);
  std::string out_;
};

/// Reads typed values back, in the order they were written. Every method
/// throws SystemError (EPROTO) when the payload is too short or malformed,
/// or when the value there has another type ("expected str, found u64").
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  std::uint64_t u64();
  std::int64_t i64();
  int i32();  ///< an i64 that must fit an int
  bool flag();
  std::string str();
  std::vector<std::string> strs();
  std::optional<std::string> opt_str();
  std::chrono::milliseconds millis();
  std::chrono::system_clock::time_point time();
  /// A list's length, checked against what is left (each element takes a
  /// byte at least), so that a corrupt count cannot make us allocate gigabytes.
  std::size_t count();
  std::uint64_t enumeration();
  bool optional();
  /// The bytes not read yet, all of them, untyped (the payload's last field).
  std::string_view rest() noexcept;
  /// Throws unless every byte was read.
  void finish() const;
  /// Throws as a malformed payload does unless `ok` (a rule between fields).
  static void check(bool ok);

 private:
  void type(WireType expected);
  void need(std::uint64_t n) const;
  std::uint64_t raw_u64();
  std::string raw_str();
  bool raw_flag();
  std::size_t raw_count();
  std::string_view data_;
  std::size_t pos_ = 0;
};

/// Writes `value`: a bool, an integer, an enum with names (enum_names.hpp),
/// a text, a duration, a time, an optional or a list of these, or a struct
/// with a field list (its on_wire fields, in list order).
template <typename T>
void put(Writer& w, const T& value);
/// Reads into `value` what put() wrote for its type.
template <typename T>
void get(Reader& r, T& value);

template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {};
template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};

template <typename T>
void put(Writer& w, const T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    w.flag(value);
  } else if constexpr (std::is_enum_v<T>) {
    w.enumeration(static_cast<std::uint64_t>(value));
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    w.i64(value);
  } else if constexpr (std::is_integral_v<T>) {
    w.u64(value);
  } else if constexpr (std::is_same_v<T, std::string>) {
    w.str(value);
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    w.strs(value);
  } else if constexpr (std::is_same_v<T, std::optional<std::string>>) {
    w.opt_str(value);
  } else if constexpr (std::is_same_v<T, std::chrono::milliseconds>) {
    w.millis(value);
  } else if constexpr (std::is_same_v<T, std::chrono::system_clock::time_point>) {
    w.time(value);
  } else if constexpr (IsOptional<T>::value) {
    w.optional(value.has_value());
    if (value) put(w, *value);
  } else if constexpr (IsVector<T>::value) {
    w.count(value.size());
    using Element = typename T::value_type;
    for (std::size_t i = 0; i < value.size(); ++i) put(w, static_cast<const Element&>(value[i]));
  } else {
    static_assert(has_fields<T>, "put(): no wire encoding for this type");
    for_each_field_in<T, on_wire>([&](const auto& f) { put(w, f.of(value)); });
  }
}

template <typename T>
void get(Reader& r, T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    value = r.flag();
  } else if constexpr (std::is_enum_v<T>) {
    const std::uint64_t v = r.enumeration();
    r.check(v <= static_cast<std::uint64_t>(std::numeric_limits<long long>::max()) &&
            enum_valid<T>(static_cast<long long>(v)));
    value = static_cast<T>(v);
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    const std::int64_t v = r.i64();
    r.check(v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max());
    value = static_cast<T>(v);
  } else if constexpr (std::is_integral_v<T>) {
    const std::uint64_t v = r.u64();
    r.check(v <= std::numeric_limits<T>::max());
    value = static_cast<T>(v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    value = r.str();
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    value = r.strs();
  } else if constexpr (std::is_same_v<T, std::optional<std::string>>) {
    value = r.opt_str();
  } else if constexpr (std::is_same_v<T, std::chrono::milliseconds>) {
    value = r.millis();
  } else if constexpr (std::is_same_v<T, std::chrono::system_clock::time_point>) {
    value = r.time();
  } else if constexpr (IsOptional<T>::value) {
    value.reset();
    if (r.optional()) get(r, value.emplace());
  } else if constexpr (IsVector<T>::value) {
    const std::size_t n = r.count();
    value.clear();
    value.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      typename T::value_type element{};
      get(r, element);
      value.push_back(std::move(element));
    }
  } else {
    static_assert(has_fields<T>, "get(): no wire encoding for this type");
    for_each_field_in<T, on_wire>([&](const auto& f) { get(r, f.of(value)); });
  }
}

/// `value` encoded alone, as the payload of a message.
template <typename T>
std::string encode(const T& value) {
  Writer w;
  put(w, value);
  return w.take();
}

/// The value a whole payload holds (encode()); throws as Reader does, also
/// when bytes are left over.
template <typename T>
T decode(std::string_view payload) {
  Reader r(payload);
  T value{};
  get(r, value);
  r.finish();
  return value;
}

}  // namespace davincirun::detail
