#include "common/text.hpp"

#include <signal.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

namespace davincirun::detail {

std::string duration_text(std::chrono::milliseconds duration) {
  return fmt::format("{:g} s", std::round(std::chrono::duration<double>(duration).count() * 10) / 10);
}

std::string shell_quote(const std::vector<std::string>& args, std::size_t limit) {
  static constexpr std::string_view plain_chars =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-";
  std::string out;
  for (const auto& arg : args) {
    if (!out.empty()) out += ' ';
    if (!arg.empty() && arg.find_first_not_of(plain_chars) == std::string::npos) {
      out += arg;
    } else {
      out += '\'';
      for (const char c : arg) out += c == '\'' ? std::string_view("'\\''") : std::string_view(&c, 1);
      out += '\'';
    }
    if (out.size() > limit) {
      out.resize(limit);
      return out + "...";
    }
  }
  return out;
}

const char* signal_name(int signal) noexcept {
  // By macro, not by number: numbers differ between architectures. Written
  // out rather than taken from sigabbrev_np(), which needs glibc 2.32.
  switch (signal) {
    case SIGHUP: return "HUP";
    case SIGINT: return "INT";
    case SIGQUIT: return "QUIT";
    case SIGILL: return "ILL";
    case SIGTRAP: return "TRAP";
    case SIGABRT: return "ABRT";
    case SIGBUS: return "BUS";
    case SIGFPE: return "FPE";
    case SIGKILL: return "KILL";
    case SIGUSR1: return "USR1";
    case SIGSEGV: return "SEGV";
    case SIGUSR2: return "USR2";
    case SIGPIPE: return "PIPE";
    case SIGALRM: return "ALRM";
    case SIGTERM: return "TERM";
#ifdef SIGSTKFLT
    case SIGSTKFLT: return "STKFLT";
#endif
    case SIGCHLD: return "CHLD";
    case SIGCONT: return "CONT";
    case SIGSTOP: return "STOP";
    case SIGTSTP: return "TSTP";
    case SIGTTIN: return "TTIN";
    case SIGTTOU: return "TTOU";
    case SIGURG: return "URG";
    case SIGXCPU: return "XCPU";
    case SIGXFSZ: return "XFSZ";
    case SIGVTALRM: return "VTALRM";
    case SIGPROF: return "PROF";
    case SIGWINCH: return "WINCH";
    case SIGIO: return "IO";
    case SIGPWR: return "PWR";
    case SIGSYS: return "SYS";
    default: return nullptr;
  }
}

std::string errno_text(int error) {
  const char* name = error == EINVAL   ? "EINVAL"
                     : error == ENOSYS ? "ENOSYS"
                     : error == EPERM  ? "EPERM"
                     : error == EACCES ? "EACCES"
                                       : nullptr;
  return (name ? std::string(name) : "errno " + std::to_string(error)) + " (" + std::strerror(error) + ")";
}

std::string utc_time(std::time_t when, const char* format) {
  std::tm utc{};
  ::gmtime_r(&when, &utc);
  char text[64];
  const std::size_t n = std::strftime(text, sizeof text, format, &utc);
  return std::string(text, n);
}

std::size_t utf8_prefix_length(std::string_view text, std::size_t max_bytes) noexcept {
  if (text.size() <= max_bytes) return text.size();
  std::size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // 10xxxxxx
  return cut;
}

std::string printable(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return out;
}

}  // namespace davincirun::detail
