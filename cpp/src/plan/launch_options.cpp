// LaunchOptions' rules, in one place: what every front end's input must
// satisfy before a rank table is even read.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <type_traits>

#include <fmt/format.h>

#include "common/text.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/plan.hpp"

namespace davincirun {

namespace {

using std::chrono::milliseconds;

double as_seconds(milliseconds value) { return std::chrono::duration<double>(value).count(); }

// Calls `f(option)` for the duration option `name` (the option list in
// plan.hpp); OptionError when there is none.
template <typename F>
void with_duration(std::string_view name, F&& f) {
  bool found = false;
  for_each_option<LaunchOptions, everywhere | on_command_line>([&](const auto& option) {
    if constexpr (std::is_same_v<typename std::decay_t<decltype(option)>::Member, milliseconds>) {
      if (!found && name == option.name) {
        found = true;
        f(option);
      }
    }
  });
  if (!found) throw OptionError(std::string(name), fmt::format("{} is not a duration option", name));
}

template <typename Option>
[[noreturn]] void out_of_range(const Option& option, double seconds) {
  throw OptionError(option.name,
                    fmt::format("{} must be a number of seconds between 0{} and {}{}, got {}", option.name,
                                option.zero_means, as_seconds(milliseconds(option.max)), option.max_means, seconds));
}

// An option's range() (plan.hpp): durations in seconds, numbers as they are.
template <typename Option>
void check_range(const LaunchOptions& options, const Option& option) {
  using M = typename Option::Member;
  if (option.max == 0) return;
  if constexpr (std::is_same_v<M, milliseconds>) {
    const milliseconds value = option.of(options);
    if (value.count() < option.min || value.count() > option.max) out_of_range(option, as_seconds(value));
  } else if constexpr (std::is_integral_v<M> || std::is_same_v<M, std::optional<int>>) {
    const auto& value = option.of(options);
    long long v = 0;
    if constexpr (std::is_integral_v<M>) {
      v = value;
    } else {
      if (!value) return;
      v = *value;
    }
    if (v < option.min || v > option.max) {
      throw OptionError(option.name,
                        fmt::format("{} must be between {} and {}, got {}", option.name, option.min, option.max, v));
    }
  }
}

void check_no_nul(std::string_view name, const std::string& value) {
  if (value.find('\0') != std::string::npos) {
    throw OptionError(std::string(name), fmt::format("{} contains a NUL byte, which no path or name can hold", name));
  }
}

}  // namespace

void LaunchOptions::set_seconds(std::string_view name, double seconds) {
  with_duration(name, [&](const auto& option) {
    // Negated so that NaN fails too.
    if (!(seconds >= 0 && seconds <= as_seconds(milliseconds(option.max)))) out_of_range(option, seconds);
    auto millis = static_cast<long long>(std::llround(seconds * 1000));
    if (seconds > 0 && millis == 0) millis = 1;  // 0 would mean "none" or "no limit"
    option.of(*this) = milliseconds(millis);
  });
}

double LaunchOptions::seconds(std::string_view name) const {
  double out = 0;
  with_duration(name, [&](const auto& option) { out = as_seconds(option.of(*this)); });
  return out;
}

LaunchMode parse_launch_mode(std::string_view text) { return parse_choice<LaunchMode>("launch_mode", text); }

void LaunchOptions::validate() const {
  if (nproc && (*nproc < 1 || *nproc > max_nproc)) {
    throw OptionError("nproc",
                      fmt::format("nproc must be a number of ranks between 1 and {}, got {}", max_nproc, *nproc));
  }
  if (nproc && !rank_table.empty()) {
    throw OptionError("nproc",
                      "nproc plans ranks on this machine without a rank table, and a rank table was given "
                      "too: give one or the other");
  }
  if (devices) {
    if (devices->empty()) throw OptionError("devices", "devices is empty: name at least one device, e.g. 0,1");
    std::vector<int> seen;
    for (const int d : *devices) {
      if (d < 0 || d > max_table_integer) {
        throw OptionError("devices", fmt::format("devices: {} is not a device id (0 to {})", d, max_table_integer));
      }
      if (std::find(seen.begin(), seen.end(), d) != seen.end()) {
        throw OptionError("devices", fmt::format("devices: device {} is named twice", d));
      }
      seen.push_back(d);
    }
    if (nproc && static_cast<std::size_t>(*nproc) != devices->size()) {
      throw OptionError("nproc", fmt::format("nproc {} does not match the {} devices given", *nproc, devices->size()));
    }
  }
  if (command.empty() || command[0].empty()) {
    throw OptionError("command", "no command given: name the program each rank runs, e.g. python train.py");
  }
  for (const auto& arg : command) {
    if (arg.find('\0') != std::string::npos) {
      throw OptionError("command", "an argument of the command contains a NUL character, which no program can receive");
    }
  }
  for (const auto& [name, value] : env) {
    if (name.empty() || name.find('=') != std::string::npos || name.find('\0') != std::string::npos) {
      throw OptionError("env", fmt::format("env: invalid variable name '{}'", detail::printable(name)));
    }
    if (value.find('\0') != std::string::npos) {
      throw OptionError("env", fmt::format("env: the value of {} contains a NUL character", name));
    }
  }
  for_each_option<LaunchOptions, everywhere | on_command_line>([&](const auto& option) { check_range(*this, option); });
  if (peer_timeout.count() == 0) {
    throw OptionError("peer_timeout",
                      "peer_timeout must be more than 0 seconds; to run each server's job on its own, turn the "
                      "peer channel off (peers=False, --no-peers)");
  }
  if (peer_port && (*peer_port < 1 || *peer_port > 65535)) {
    throw OptionError("peer_port", fmt::format("peer_port must be a TCP port number (1-65535), got {}", *peer_port));
  }
  if (ranks_to_show) {
    for (const int rank : *ranks_to_show) {
      if (rank < 0) {
        throw OptionError("ranks_to_show",
                          fmt::format("ranks_to_show: rank {} does not exist (ranks are numbered from 0)", rank));
      }
    }
  }
  check_no_nul("rank_table", rank_table);
  check_no_nul("work_dir", work_dir);
  check_no_nul("log_dir", log_dir);
  if (server_id) check_no_nul("server_id", *server_id);
  check_no_nul("device_dir", device_dir);
  check_no_nul("supervisor_program", supervisor_program);
  check_no_nul("device_lock_dir", device_lock_dir);
  for (const auto& path : remove_after_job) {
    check_no_nul("remove_after_job", path);
    if (path.empty() || path[0] != '/') {
      // Removed recursively by another process: never relative to wherever that runs.
      throw OptionError("remove_after_job",
                        fmt::format("remove_after_job: '{}' is not an absolute path", detail::printable(path)));
    }
  }
  // A relative lock directory would be another one for jobs started from
  // other directories: they would silently share devices.
  if (!device_lock_dir.empty() && device_lock_dir != "off" && device_lock_dir[0] != '/') {
    throw OptionError("device_lock_dir",
                      fmt::format("LaunchOptions::device_lock_dir must be an absolute path (or \"off\"), got '{}': "
                                  "jobs started from other directories would not see each other's device locks",
                                  device_lock_dir));
  }
}

}  // namespace davincirun
