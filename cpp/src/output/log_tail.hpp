// A log read back as a terminal showed it: the end of the file, and each
// line redrawn with '\r' (a progress bar) in its last state. The log
// streamer keeps the raw bytes in the file; whatever quotes the file later
// (read_log_tail(), the root cause) reads it through these.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace davincirun::detail {

/// What a terminal shows of `line` (no '\n' in it): the text after its last
/// '\r', trailing '\r's aside ("\r\n" ends a line; `print(x, end="\r")`
/// leaves x shown). A view into `line`.
std::string_view shown_line(std::string_view line) noexcept;

/// Each line of `text` as shown_line() has it, in order: split at '\n', a
/// last line without '\n' included when not empty. Views into `text`.
std::vector<std::string_view> shown_lines(std::string_view text);

/// The end of a log file.
struct LogEnd {
  std::string text;  ///< its last bytes; empty when it cannot be read
  bool cut = false;  ///< the file is longer: `text` starts inside it, maybe mid-line
};

/// The last `max_bytes` bytes of the file at `path`.
LogEnd read_log_end(const std::string& path, std::size_t max_bytes);

}  // namespace davincirun::detail
