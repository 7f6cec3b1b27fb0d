#include "davincirun/errors.hpp"

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/text.hpp"

namespace davincirun {

namespace {
std::string rank_table_message(const std::string& source, const std::optional<std::string>& pointer,
                               const std::string& detail) {
  std::string out = source;
  if (pointer) {
    // The root pointer is the empty string; name it in words to stay readable.
    out += ": ";
    out += pointer->empty() ? std::string("(top level)") : *pointer;
  }
  out += ": ";
  out += detail;
  return out;
}
}  // namespace

RankTableError::RankTableError(Kind kind, std::string source, std::optional<std::string> pointer, std::string detail)
    : Error(rank_table_message(source, pointer, detail)),
      kind_(kind),
      source_(std::move(source)),
      pointer_(std::move(pointer)),
      detail_(std::move(detail)) {}

OptionError::OptionError(std::string option, const std::string& message)
    : ConfigError(message),
      option_(std::move(option)),
      name_at_(!option_.empty() && message.rfind(option_, 0) == 0 ? 0 : std::string::npos) {}

OptionError::OptionError(std::string option, const std::string& before, const std::string& after)
    : ConfigError(before + option + after), option_(std::move(option)), name_at_(before.size()) {}

void throw_unknown_choice(const std::string& option, const std::string& choices, std::string_view text) {
  throw OptionError(option, option + " must be " + choices + ", got '" + detail::printable(std::string(text)) + "'");
}

std::string OptionError::message_naming(std::string_view name) const {
  std::string message = what();
  if (name_at_ != std::string::npos) message.replace(name_at_, option_.size(), name);
  return message;
}

DeviceBusyError::DeviceBusyError(std::vector<int> devices, pid_t holder_pid, std::string holder_description,
                                 const std::string& message)
    : ConfigError(message),
      devices_(std::move(devices)),
      holder_pid_(holder_pid),
      holder_description_(std::move(holder_description)) {}

SpawnError::SpawnError(int rank, std::string command, int os_errno, const std::string& message, std::string search_path)
    : Error(message),
      rank_(rank),
      command_(std::move(command)),
      errno_(os_errno),
      search_path_(std::move(search_path)) {}

int SpawnError::exit_code() const noexcept {
  // The shell's convention: 127 when the command does not exist, 126 otherwise.
  return (errno_ == ENOENT || errno_ == ENOTDIR) ? 127 : 126;
}

SystemError::SystemError(const std::string& what, int os_errno)
    : Error(what + ": " + std::strerror(os_errno)), errno_(os_errno) {}

}  // namespace davincirun
