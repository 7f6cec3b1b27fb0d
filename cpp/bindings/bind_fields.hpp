// Python properties from the core's field lists (fields.hpp): a class gets
// one property per in_python field, under the field's name and with its
// doc, its value converted by type. What Python computes from several
// fields is bound explicitly next to the call.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/typing.h>

#include <cctype>
#include <chrono>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/fields.hpp"
#include "davincirun/job_types.hpp"
#include "davincirun/plan.hpp"

namespace davincirun::python {

template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};
template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {};
template <>
struct IsVector<std::vector<bool>> : std::false_type {};

/// `value` as Python shows it: enums by name, times in seconds since the
/// epoch, texts decoded as `text` says; classes as the bound class.
template <typename T>
auto python_value(const T& value, FieldText text) {
  if constexpr (std::is_enum_v<T>) {
    return to_string(value);
  } else if constexpr (std::is_same_v<T, std::chrono::system_clock::time_point>) {
    return seconds_since_epoch(value);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return text == FieldText::any       ? lenient_text(value)
           : text == FieldText::os_path ? fs_text(value)
                                        : pybind11::str(value);
  } else if constexpr (std::is_same_v<T, std::vector<std::pair<std::string, std::string>>>) {
    pybind11::typing::List<pybind11::typing::Tuple<pybind11::str, pybind11::str>> out;
    for (const auto& [name, v] : value) out.append(pybind11::make_tuple(fs_text(name), fs_text(v)));
    return out;
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    pybind11::typing::List<pybind11::str> out;
    for (const auto& item : value) out.append(python_value(item, text));
    return out;
  } else if constexpr (IsOptional<T>::value) {
    using Value = decltype(python_value(*value, text));
    return value ? std::optional<Value>(python_value(*value, text)) : std::optional<Value>();
  } else if constexpr (IsVector<T>::value) {
    std::vector<decltype(python_value(std::declval<typename T::value_type>(), text))> out;
    for (const auto& item : value) out.push_back(python_value(item, text));
    return out;
  } else {
    return value;
  }
}

/// Read-only properties for the in_python fields of `S` (a result).
template <typename S, typename Class>
void def_fields(Class& cls) {
  for_each_field_in<S, in_python>([&](const auto& f) {
    cls.def_property_readonly(f.name, [f](const S& s) { return python_value(f.of(s), f.text); }, f.doc);
  });
}

/// An option's doc: its text (option_text()), as a sentence.
template <typename Option>
std::string option_doc(const Option& option) {
  std::string doc = option_text(option);
  if (!doc.empty()) doc[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(doc[0])));
  if (!doc.empty() && doc.back() != '.') doc += '.';
  return doc;
}

/// Read-write properties for the options of LaunchOptions (plan.hpp): a
/// duration in seconds (its range its rule), an enum by name, the rest as
/// its type. Rule violations raise LaunchConfigError naming the option.
template <typename Class>
void def_options(Class& cls) {
  for_each_option<LaunchOptions, in_python>([&](const auto& option) {
    using M = typename std::decay_t<decltype(option)>::Member;
    std::string doc = option_doc(option);
    if constexpr (std::is_same_v<M, std::chrono::milliseconds>) {
      if (doc.find("seconds") == std::string::npos) doc += " In seconds.";
      const std::string name = option.name;
      cls.def_property(
          option.name, [name](const LaunchOptions& o) { return o.seconds(name); },
          [name](LaunchOptions& o, const pybind11::object& value) {
            if (pybind11::isinstance<pybind11::bool_>(value) ||
                !(pybind11::isinstance<pybind11::int_>(value) || pybind11::isinstance<pybind11::float_>(value))) {
              throw pybind11::type_error(name + ": expected a number of seconds, got " +
                                         pybind11::repr(value).cast<std::string>());
            }
            o.set_seconds(name, value.cast<double>());
          },
          doc.c_str());
    } else if constexpr (std::is_enum_v<M>) {
      cls.def_property(
          option.name, [option](const LaunchOptions& o) { return std::string(to_string(option.of(o))); },
          [option](LaunchOptions& o, const std::string& v) { option.of(o) = parse_choice<M>(option.name, v); },
          doc.c_str());
    } else {
      cls.def_property(
          option.name, [option](const LaunchOptions& o) { return python_value(option.of(o), option.text); },
          [option](LaunchOptions& o, M v) { option.of(o) = std::move(v); }, doc.c_str());
    }
  });
}

}  // namespace davincirun::python
