// rank_root_cause(): a failed rank's root cause, from the error file torch's
// `@record` wrote when there is one (it holds the exception itself, where a
// log may hold only its echo among other ranks' lines), else from its log.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <nlohmann/json.hpp>

#include "common/text.hpp"
#include "davincirun/root_cause.hpp"

namespace davincirun {

namespace {

constexpr std::size_t error_file_bytes = std::size_t{1} << 20;

// The first error_file_bytes of `path`; empty when it cannot be read.
std::string read_head(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return {};
  std::string out;
  char buffer[16384];
  while (out.size() < error_file_bytes) {
    const ssize_t n = ::read(fd, buffer, std::min(sizeof buffer, error_file_bytes - out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

// Framework messages that send a user the wrong way, and what to do instead.
struct Hint {
  std::string_view said;  ///< in the exception line
  std::string_view hint;
};
constexpr Hint kHints[] = {
    {"without using 'mpirun'",
     "MindSpore reads a rank table only on NPUs; on a machine without them (its CPU build), run the job with "
     "--launch-mode dynamic-cluster (launch_mode=\"dynamic-cluster\"), where davincirun starts MindSpore's "
     "scheduler as msrun does"},
};

RootCause with_hint(RootCause cause) {
  for (const Hint& h : kHints) {
    if (cause.exception.find(h.said) != std::string::npos) cause.hint = h.hint;
  }
  return cause;
}

// A string member of a JSON object, or "" when absent or of another type.
std::string text_of(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return {};
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::string torch_error_file_for(const std::string& log_path) {
  constexpr std::string_view suffix = ".log";
  const bool has_suffix =
      log_path.size() > suffix.size() && log_path.compare(log_path.size() - suffix.size(), suffix.size(), suffix) == 0;
  return (has_suffix ? log_path.substr(0, log_path.size() - suffix.size()) : log_path) + ".error.json";
}

RootCause rank_root_cause(const std::string& log_path, std::size_t tail_lines) {
  const std::string text = read_head(torch_error_file_for(log_path));
  const auto json = nlohmann::json::parse(text, nullptr, false);
  if (!text.empty() && !json.is_discarded() && json.is_object() && json.contains("message")) {
    const nlohmann::json& message = json["message"];
    // The older layout nests the text and the call stack; the newer one is a string.
    std::string exception = message.is_string() ? message.get<std::string>() : text_of(message, "message");
    const std::string callstack =
        message.is_object() && message.contains("extraInfo") ? text_of(message["extraInfo"], "py_callstack") : "";
    if (!exception.empty() || !callstack.empty()) {
      RootCause out = find_root_cause(callstack.empty() ? exception : callstack, tail_lines);
      const std::string first_line = exception.substr(0, exception.find('\n'));
      if (!first_line.empty())
        out.exception = first_line.substr(0, detail::utf8_prefix_length(first_line, RootCauseLimits::line_bytes));
      out.found = true;
      out.source = "its torch error file";
      return with_hint(std::move(out));
    }
  }
  return with_hint(read_root_cause(log_path, tail_lines));
}

}  // namespace davincirun
