#include "process/stop_notice.hpp"

#include <cmath>

#include <fmt/format.h>

namespace davincirun::detail {

std::string describe_running(const std::vector<RunningRank>& ranks) {
  constexpr std::size_t shown = 8;
  std::string out;
  for (std::size_t i = 0; i < ranks.size() && i < shown; ++i) {
    if (i > 0) out += ", ";
    out += fmt::format("{} (pid {})", process_name(ranks[i].role, ranks[i].rank), ranks[i].pid);
  }
  if (ranks.size() > shown) out += fmt::format(" and {} more", ranks.size() - shown);
  return out;
}

std::string kill_hint(std::chrono::milliseconds left, const std::string& request_name, bool user_stop) {
  const double seconds = std::round(std::chrono::duration<double>(left).count() * 10) / 10;
  std::string hint = seconds > 0 ? fmt::format("SIGKILL in {:g} s", seconds) : std::string("SIGKILL at once");
  if (seconds > 0 && !request_name.empty()) {
    hint += fmt::format(", or at once on {}{}", user_stop ? "a second " : "", request_name);
  }
  return hint;
}

}  // namespace davincirun::detail
