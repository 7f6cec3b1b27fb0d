// Room for a job's descriptors under the open-file limit (RLIMIT_NOFILE).
//
// The supervisor holds four descriptors per rank for the whole job: the
// read end of its output pipe, its log file, its pidfd and its device lock.
// Most systems start processes with a soft limit of 1,024 and a far higher
// hard limit (systemd: 524,288), which a process may raise itself to: 256
// ranks would already need more than the soft limit. So the supervisor
// raises its own soft limit as far as the job needs, never past the hard
// limit, and gives each rank the limit it found (as Go's runtime does for
// the programs it starts, since Go 1.19), so that the ranks see the same
// limit as without davincirun.
#pragma once

#include <sys/resource.h>

#include <cstddef>
#include <optional>

namespace davincirun::detail {

/// Descriptors the supervisor holds per rank, and for the job itself
/// (epoll, eventfds, signalfd, lifeline, console, peer sockets, run
/// directory, summary), with a margin.
inline constexpr std::size_t descriptors_per_rank = 4;
inline constexpr std::size_t descriptors_per_job = 64;

/// Descriptors a job of `ranks` ranks needs, on a server whose peer agent
/// holds `peer_connections` sockets besides (the hub: one per other server;
/// a member: none beyond the job's own).
std::size_t descriptors_needed(std::size_t ranks, std::size_t peer_connections = 0) noexcept;

/// Raises this process's soft RLIMIT_NOFILE to at least
/// descriptors_needed(ranks, peer_connections), up to the hard limit; never
/// lowers it. Throws ConfigError before anything starts when the hard limit
/// is too low, saying how many ranks (or servers) fit and how to raise it.
void make_room_for_ranks(std::size_t ranks, std::size_t peer_connections = 0);

/// The soft and hard limits this process had before make_room_for_ranks()
/// first raised them, to restore in each rank; nullopt when never raised.
std::optional<rlimit> limit_for_ranks() noexcept;

}  // namespace davincirun::detail
