// Typed errors reported by davincirun.
//
// Failures caused by the input or the environment (a bad rank table or
// option, a missing program, an OS refusal) are thrown as one of the
// exceptions below, all derived from davincirun::Error; each message names
// what went wrong and where. Misuse of the API itself (a broken
// precondition, e.g. Job::wait() called twice, ChildProcess::reap() after
// the child was reaped) throws std::logic_error, which is not an Error.
#pragma once

#include <sys/types.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "davincirun/enum_names.hpp"

namespace davincirun {

/// Base of every error davincirun throws about its input or environment.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A rank table that cannot be used.
///
/// `what()` reads `<source>: <pointer>: <detail>`, e.g.
/// `hccl.json: /server_list/1/device/3/rank_id: expected a non-negative decimal integer, got "x"`.
class RankTableError : public Error {
 public:
  enum class Kind {
    io,            ///< the file cannot be read (missing, permission, is a directory)
    empty,         ///< the file has no content
    syntax,        ///< not valid JSON; detail carries line, column and byte offset
    shape,         ///< a value has the wrong JSON type (object, array, string...)
    missing,       ///< a required field is absent
    bad_value,     ///< a value has the right type but is not acceptable
    duplicate,     ///< a value that must be unique appears twice, or a key twice in one object
    inconsistent,  ///< table-wide rules (rank numbering, server_count, blocks)
    unsupported,   ///< a format or version this launcher does not read
  };

  /// `source`: file path or label of the document. `pointer`: RFC 6901 JSON
  /// Pointer of the offending value ("" is the whole document), or nullopt
  /// when the problem is not one value (e.g. missing rank numbers).
  RankTableError(Kind kind, std::string source, std::optional<std::string> pointer, std::string detail);

  Kind kind() const noexcept { return kind_; }
  const std::string& source() const noexcept { return source_; }
  const std::optional<std::string>& pointer() const noexcept { return pointer_; }
  const std::string& detail() const noexcept { return detail_; }

 private:
  Kind kind_;
  std::string source_;
  std::optional<std::string> pointer_;
  std::string detail_;
};

/// to_string(): the enumerator's name.
DAVINCIRUN_ENUM_NAMES(RankTableError::Kind, "io", "empty", "syntax", "shape", "missing", "bad_value", "duplicate",
                      "inconsistent", "unsupported");

/// A launch that cannot be configured as asked: empty command, no rank table
/// given, this machine not found in the table, log directory unusable...
class ConfigError : public Error {
 public:
  using Error::Error;
};

/// One launch option breaks its rule (LaunchOptions::validate() in plan.hpp),
/// or is what the user should give to get past this error: a timeout out of
/// range, a variable name with '=', a NUL byte in a path, no rank table,
/// several servers that could be this machine...
/// `what()` names the option as the LaunchOptions field and the Python
/// keyword spell it ("grace_period", "env", "ranks_to_show"), at most once;
/// message_naming() puts a front end's own spelling there instead (the CLI:
/// "--grace-period").
class OptionError : public ConfigError {
 public:
  /// `message` names the option at its start ("work_dir '/x' is not a
  /// directory", "env: invalid variable name ''"), or nowhere.
  OptionError(std::string option, const std::string& message);
  /// A message naming the option inside: `before` + option + `after`, e.g.
  /// "no rank table: set RANK_TABLE_FILE or give " + "rank_table" + " (...)",
  /// which then names nproc, for a machine without a table.
  OptionError(std::string option, const std::string& before, const std::string& after);
  /// The option's name, e.g. "grace_period" (the CLI flag is --grace-period).
  const std::string& option() const noexcept { return option_; }
  /// Where what() names the option (a byte offset), std::string::npos when
  /// it does not.
  std::size_t name_at() const noexcept { return name_at_; }
  /// what() with `name` in place of the option's name, e.g.
  /// message_naming("--work-dir") == "--work-dir '/x' is not a directory";
  /// what() itself when the message does not name the option.
  std::string message_naming(std::string_view name) const;

 private:
  std::string option_;
  std::size_t name_at_;
};

/// An enum option given a name it does not have: OptionError("<option>
/// must be <choices>, got '<text>'"), the text shown printable.
[[noreturn]] void throw_unknown_choice(const std::string& option, const std::string& choices, std::string_view text);

/// The value of enum option `option` named `text` (enum_names.hpp);
/// throw_unknown_choice() for any other text.
template <typename E>
E parse_choice(const std::string& option, std::string_view text) {
  if (const auto value = enum_parse<E>(text)) return *value;
  throw_unknown_choice(option, enum_choices<E>(), text);
}

/// No rank table was named: LaunchOptions::rank_table is empty and neither
/// RANK_TABLE_FILE_V_1_0 nor RANK_TABLE_FILE is set. Its option is
/// "rank_table"; Python raises it as NoRankTableError, also a RuntimeError
/// (what davincirunsdk 0.1.x raised then).
class NoRankTableError : public OptionError {
 public:
  /// The message names the option between `before` and `after`, as OptionError's.
  NoRankTableError(const std::string& before, const std::string& after) : OptionError("rank_table", before, after) {}
};

/// Devices of this job are locked by another job (device_lock.hpp); nothing
/// was started. `what()` names the devices and every holder, e.g.
/// `devices 0, 1 are in use by another job: pid 1234 (job 20261130-ab12, started 2026-11-30T20:01:02Z): python
/// train.py; wait for it to end, or run on other devices (devices= / --devices)`.
class DeviceBusyError : public ConfigError {
 public:
  DeviceBusyError(std::vector<int> devices, pid_t holder_pid, std::string holder_description,
                  const std::string& message);

  /// The busy devices (physical ids), ascending.
  const std::vector<int>& devices() const noexcept { return devices_; }
  /// The process holding the first of them, as the kernel reports it; 0
  /// when that process is in another PID namespace.
  pid_t holder_pid() const noexcept { return holder_pid_; }
  /// What is known of that process: "job J, started T: command" from its
  /// lock file, else its command line from /proc; empty when neither is readable.
  const std::string& holder_description() const noexcept { return holder_description_; }

 private:
  std::vector<int> devices_;
  pid_t holder_pid_;
  std::string holder_description_;
};

/// A rank's process could not be started. Nothing of the job is left running
/// when this is thrown.
class SpawnError : public Error {
 public:
  /// `os_errno`: the errno of the failed step (e.g. ENOENT from execve);
  /// `exit_code`: the shell's convention for it (127 not found, 126 not
  /// executable or other exec failure). `search_path`: the PATH the
  /// command was looked up in when that failed (not found, or found but not
  /// executable; the message names only its first directories), else empty.
  SpawnError(int rank, std::string command, int os_errno, const std::string& message, std::string search_path = {});

  int rank() const noexcept { return rank_; }
  const std::string& command() const noexcept { return command_; }
  int os_errno() const noexcept { return errno_; }
  int exit_code() const noexcept;
  const std::string& search_path() const noexcept { return search_path_; }

 private:
  int rank_;
  std::string command_;
  int errno_;
  std::string search_path_;
};

/// A system call failed outside a rank's start-up (pipes, epoll, log files).
class SystemError : public Error {
 public:
  /// `what` names the operation and its object, e.g. `open /tmp/log/rank_0.log`.
  SystemError(const std::string& what, int os_errno);
  int os_errno() const noexcept { return errno_; }

 private:
  int errno_;
};

}  // namespace davincirun
