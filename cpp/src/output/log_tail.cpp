// A log read back as a terminal showed it (log_tail.hpp), and
// read_log_tail() (log_streamer.hpp) built on it.
#include "output/log_tail.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "davincirun/log_streamer.hpp"
#include "davincirun/unique_fd.hpp"

namespace davincirun {

namespace detail {

std::string_view shown_line(std::string_view line) noexcept {
  while (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const std::size_t cr = line.rfind('\r');
  if (cr != std::string_view::npos) line.remove_prefix(cr + 1);
  return line;
}

std::vector<std::string_view> shown_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    lines.push_back(shown_line(text.substr(0, nl)));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return lines;
}

LogEnd read_log_end(const std::string& path, std::size_t max_bytes) {
  LogEnd end;
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return end;
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0 || st.st_size <= 0) return end;
  const auto size = static_cast<std::size_t>(st.st_size);
  const std::size_t want = std::min(size, max_bytes);
  end.text.resize(want);
  std::size_t got = 0;
  while (got < want) {
    const ssize_t n = ::pread(fd.get(), end.text.data() + got, want - got, static_cast<off_t>(size - want + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EISDIR (a directory), EIO, or the file shrank
    got += static_cast<std::size_t>(n);
  }
  end.text.resize(got);
  end.cut = want < size;
  return end;
}

}  // namespace detail

std::string read_log_tail(const std::string& path, std::size_t max_lines, std::size_t max_bytes) {
  if (max_lines == 0 || max_bytes == 0) return {};
  std::string data = detail::read_log_end(path, max_bytes).text;
  // Drop a trailing newline, then keep what follows the max_lines-th newline from the end.
  if (!data.empty() && data.back() == '\n') data.pop_back();
  std::size_t pos = data.size();
  for (std::size_t lines = 0; lines < max_lines; ++lines) {
    std::size_t nl = pos == 0 ? std::string::npos : data.rfind('\n', pos - 1);
    if (nl == std::string::npos) {
      pos = std::string::npos;
      break;
    }
    pos = nl;
  }
  const std::string_view tail =
      pos == std::string::npos ? std::string_view(data) : std::string_view(data).substr(pos + 1);
  const std::vector<std::string_view> lines = detail::shown_lines(tail);
  std::string out;
  out.reserve(tail.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += '\n';
    out.append(lines[i]);
  }
  if (!tail.empty() && tail.back() == '\n') out += '\n';
  return out;
}

}  // namespace davincirun
