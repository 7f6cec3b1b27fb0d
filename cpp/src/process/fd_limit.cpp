#include "process/fd_limit.hpp"

#include <cerrno>
#include <mutex>

#include <fmt/format.h>

#include "davincirun/errors.hpp"

namespace davincirun::detail {

namespace {

std::mutex limit_mutex;
std::optional<rlimit> original;  // guarded by limit_mutex; set once, at the first raise

}  // namespace

std::size_t descriptors_needed(std::size_t ranks) noexcept {
  return ranks * descriptors_per_rank + descriptors_per_job;
}

void make_room_for_ranks(std::size_t ranks) {
  const std::lock_guard<std::mutex> lock(limit_mutex);
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) throw SystemError("getrlimit RLIMIT_NOFILE", errno);
  const auto needed = static_cast<rlim_t>(descriptors_needed(ranks));
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= needed) return;
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed) {
    const std::size_t fit =
        limit.rlim_max > descriptors_per_job ? (limit.rlim_max - descriptors_per_job) / descriptors_per_rank : 0;
    throw ConfigError(fmt::format(
        "{} ranks need about {} open files ({} per rank), but this process may open at most {} (its hard "
        "limit, `ulimit -Hn`): at most {} ranks fit. Raise the hard limit where the job starts: `ulimit -Hn {}` "
        "as root, LimitNOFILE= for a systemd service, `docker run --ulimit nofile={}:{}`",
        ranks, needed, descriptors_per_rank, limit.rlim_max, fit, needed, needed, needed));
  }
  const rlimit before = limit;
  limit.rlim_cur = needed;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) throw SystemError("setrlimit RLIMIT_NOFILE", errno);
  if (!original) original = before;
}

std::optional<rlimit> limit_for_ranks() noexcept {
  const std::lock_guard<std::mutex> lock(limit_mutex);
  return original;
}

}  // namespace davincirun::detail
