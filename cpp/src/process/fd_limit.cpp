#include "process/fd_limit.hpp"

#include <cerrno>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "davincirun/errors.hpp"

namespace davincirun::detail {

namespace {

std::mutex limit_mutex;
std::optional<rlimit> original;  // guarded by limit_mutex; set once, at the first raise

}  // namespace

std::size_t descriptors_needed(std::size_t ranks, std::size_t peer_connections) noexcept {
  return ranks * descriptors_per_rank + peer_connections + descriptors_per_job;
}

void make_room_for_ranks(std::size_t ranks, std::size_t peer_connections) {
  const std::lock_guard<std::mutex> lock(limit_mutex);
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) throw SystemError("getrlimit RLIMIT_NOFILE", errno);
  const auto needed = static_cast<rlim_t>(descriptors_needed(ranks, peer_connections));
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= needed) return;
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed) {
    const std::string fits =
        peer_connections == 0
            ? fmt::format("at most {} ranks fit", limit.rlim_max > descriptors_per_job
                                                      ? (limit.rlim_max - descriptors_per_job) / descriptors_per_rank
                                                      : 0)
            : fmt::format("the peer channel's hub needs one for each of the {} other servers", peer_connections);
    throw ConfigError(
        fmt::format("{} ranks need about {} open files ({} per rank{}), but this process may open at most {} (its hard "
                    "limit, `ulimit -Hn`): {}. Raise the hard limit where the job starts: `ulimit -Hn {}` "
                    "as root, LimitNOFILE= for a systemd service, `docker run --ulimit nofile={}:{}`",
                    ranks, needed, descriptors_per_rank,
                    peer_connections == 0 ? std::string() : fmt::format(", and {} for other servers", peer_connections),
                    limit.rlim_max, fits, needed, needed, needed));
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
