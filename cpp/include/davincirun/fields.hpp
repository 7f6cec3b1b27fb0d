// Field lists: each struct that crosses a boundary (the lifeline between the
// launcher and its supervisor process, the peer channel, summary.json, the
// Python module, the command line) lists its fields once, next to its
// declaration, and every encoding walks that list:
//
//   constexpr auto fields_of(const PeerStop*) {
//     return std::make_tuple(field("server_id", &PeerStop::server_id, "Where it happened."), ...);
//   }
//
// A field goes everywhere unless only() says where; what is computed from
// fields (a text made of an exit status, a Python property that reads two
// of them) stays explicit at its one place of use. Launch options also
// carry their command-line flag and range here (flag(), range()).
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

namespace davincirun {

/// Where a field goes besides C++.
enum FieldUse : unsigned {
  on_wire = 1U,     ///< the lifeline's messages, the peer channel's payloads
  in_summary = 2U,  ///< summary.json
  in_python = 4U,   ///< a property of the Python class
  everywhere = 7U,
  on_command_line = 8U,  ///< a launch option's `davincirun` flag: set by flag()
};

/// How a text field reaches Python (bytes from the system may be any bytes).
enum class FieldText : unsigned char {
  utf8,     ///< UTF-8 text; anything else raises UnicodeDecodeError
  any,      ///< rank output: invalid UTF-8 shows as U+FFFD
  os_path,  ///< paths and arguments: invalid UTF-8 as surrogate escapes (os.fsdecode)
};

/// One field of `S`: its name (C++, Python, summary.json), member and doc.
template <typename S, typename M>
struct Field {
  using Struct = S;
  using Member = M;

  const char* name;
  M S::* member;
  const char* doc;
  unsigned uses = everywhere;
  const char* summary_key = nullptr;  ///< summary.json's key when it is not `name`
  FieldText text = FieldText::utf8;
  // A launch option's command-line flag, its usage and its range.
  const char* metavar = nullptr;  ///< the flag's value, e.g. "SEC"; nullptr: no flag
  char short_flag = 0;            ///< e.g. 'r' for -r
  const char* expects = nullptr;  ///< what a bad value is told it should be: "a TCP port number, e.g. 29600"
  long long min = 0;              ///< the range, in the member's unit (milliseconds for durations)
  long long max = 0;              ///< 0: no range of its own
  const char* zero_means = "";    ///< in range messages: " (no limit)"
  const char* max_means = "";     ///< in range messages: " (one year)"

  constexpr Field only(unsigned where) const {
    Field f = *this;
    f.uses = where | (uses & on_command_line);
    return f;
  }
  constexpr Field summary_as(const char* key) const {
    Field f = *this;
    f.summary_key = key;
    return f;
  }
  constexpr Field as(FieldText kind) const {
    Field f = *this;
    f.text = kind;
    return f;
  }
  /// A command-line flag --<name with '-'> taking `value_name` (a bool: no
  /// value; --no-<name> when it defaults to true).
  constexpr Field flag(const char* value_name, char short_name = 0, const char* what = nullptr) const {
    Field f = *this;
    f.uses |= on_command_line;
    f.metavar = value_name;
    f.short_flag = short_name;
    f.expects = what;
    return f;
  }
  constexpr Field range(long long lowest, long long highest, const char* zero = "", const char* top = "") const {
    Field f = *this;
    f.min = lowest;
    f.max = highest;
    f.zero_means = zero;
    f.max_means = top;
    return f;
  }

  const char* key() const noexcept { return summary_key != nullptr ? summary_key : name; }
  const M& of(const S& s) const noexcept { return s.*member; }
  M& of(S& s) const noexcept { return s.*member; }
};

template <typename S, typename M>
constexpr Field<S, M> field(const char* name, M S::* member, const char* doc = "") {
  return {name, member, doc};
}

/// Whether `T` has a field list (a fields_of(const T*) found by argument-dependent lookup).
template <typename T, typename = void>
struct HasFields : std::false_type {};
template <typename T>
struct HasFields<T, std::void_t<decltype(fields_of(static_cast<const T*>(nullptr)))>> : std::true_type {};
template <typename T>
inline constexpr bool has_fields = HasFields<T>::value;

/// The field list of `T`.
template <typename T>
inline constexpr auto fields = fields_of(static_cast<const T*>(nullptr));

/// Calls `f(field)` for each field of `T`, in list order.
template <typename T, typename F>
void for_each_field(F&& f) {
  std::apply([&](const auto&... each) { (f(each), ...); }, fields<T>);
}

namespace fields_detail {
template <typename T, unsigned Use, std::size_t I, typename F>
void call_if_used(F& f) {
  if constexpr ((std::get<I>(fields<T>).uses & Use) != 0U) f(std::get<I>(fields<T>));
}
template <typename T, unsigned Use, typename F, std::size_t... I>
void call_each_used(F& f, std::index_sequence<I...> /*indexes*/) {
  (call_if_used<T, Use, I>(f), ...);
}
}  // namespace fields_detail

/// Calls `f(field)` for each field of `T` that goes to `Use` (on_wire,
/// in_summary, in_python), in list order; the others are not even compiled
/// for it, so their types need no encoding there.
template <typename T, unsigned Use, typename F>
void for_each_field_in(F&& f) {
  fields_detail::call_each_used<T, Use>(f, std::make_index_sequence<std::tuple_size_v<decltype(fields<T>)>>());
}

/// A field of a member struct seen from the outer struct (LaunchOptions::
/// supervisor's grace_period): the inner field's name and rules, reached
/// through the outer member.
template <typename Outer, typename Inner>
struct Nested : Inner {
  using Struct = typename Outer::Struct;
  using Member = typename Inner::Member;
  typename Outer::Member Struct::* outer;

  constexpr Nested(const Outer& o, const Inner& i) : Inner(i), outer(o.member) {}
  const Member& of(const Struct& s) const noexcept { return Inner::of(s.*outer); }
  Member& of(Struct& s) const noexcept { return Inner::of(s.*outer); }
};

namespace fields_detail {
template <typename T, unsigned Use, std::size_t I, typename F>
void call_option_if_used(F& f) {
  constexpr auto outer = std::get<I>(fields<T>);
  using Outer = std::decay_t<decltype(outer)>;
  if constexpr (has_fields<typename Outer::Member>) {
    for_each_field_in<typename Outer::Member, Use>(
        [&](const auto& inner) { f(Nested<Outer, std::decay_t<decltype(inner)>>(outer, inner)); });
  } else if constexpr ((outer.uses & Use) != 0U) {
    f(outer);
  }
}
template <typename T, unsigned Use, typename F, std::size_t... I>
void call_each_option(F& f, std::index_sequence<I...> /*indexes*/) {
  (call_option_if_used<T, Use, I>(f), ...);
}
}  // namespace fields_detail

/// Calls `f(field)` for each option of `T` that goes to `Use` (in_python,
/// on_command_line): its fields, and in place of a member that has a field
/// list of its own, that list's (as Nested).
template <typename T, unsigned Use, typename F>
void for_each_option(F&& f) {
  fields_detail::call_each_option<T, Use>(f, std::make_index_sequence<std::tuple_size_v<decltype(fields<T>)>>());
}

}  // namespace davincirun
