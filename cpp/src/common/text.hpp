// Small text helpers shared by every stage: how a command, a signal and a
// moment in time are written in messages, file names and logs, and where
// text may be cut.
#pragma once

#include <chrono>
#include <cstddef>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

namespace davincirun::detail {

/// `args` as a POSIX shell would read them back: plain words as they are,
/// anything else in single quotes ("python -c 'print(1)'"). When the text
/// grows beyond `limit` bytes it is cut there and "..." appended.
std::string shell_quote(const std::vector<std::string>& args, std::size_t limit = std::string::npos);

/// "TERM" for SIGTERM: the signal's name without "SIG"; nullptr for a
/// number that names no standard signal (real-time signals included).
const char* signal_name(int signal) noexcept;

/// How a refused system call is named in a message: "EINVAL (Invalid
/// argument)"; the macro's name for the errnos a seccomp filter or an
/// emulator answers with (EINVAL, ENOSYS, EPERM, EACCES), else "errno N (...)".
std::string errno_text(int error);

/// A duration in the supervisor's messages, to a tenth of a second without
/// trailing zeros: "1 s", "0.5 s", "10 s".
std::string duration_text(std::chrono::milliseconds duration);

/// `when` in UTC, formatted by strftime(3) with `format` (e.g. "%Y%m%d-%H%M%S").
std::string utc_time(std::time_t when, const char* format);

/// The length of the longest start of `text` that is at most `max_bytes`
/// long and does not end inside a UTF-8 sequence: `text.size()` when it
/// fits, else `max_bytes` moved back over continuation bytes.
std::size_t utf8_prefix_length(std::string_view text, std::size_t max_bytes) noexcept;

/// `text` with every control character (below 0x20, and 0x7f) replaced by
/// '?': for values read from files or /proc that a message quotes.
std::string printable(std::string_view text);

}  // namespace davincirun::detail
