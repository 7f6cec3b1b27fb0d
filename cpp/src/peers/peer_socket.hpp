// The peer channel's TCP sockets: non-blocking, no delay (a stop must not
// wait for Nagle), never raising SIGPIPE.
#pragma once

#include <sys/socket.h>

#include <string>

#include "davincirun/unique_fd.hpp"

namespace davincirun::detail {

/// A listening socket on every address of this machine (IPv6 and IPv4 when
/// `address` is an IPv6 literal, else IPv4), port `port`, non-blocking.
/// Throws ConfigError naming the port when it is taken, SystemError otherwise.
UniqueFd listen_on(const std::string& address, int port);

/// Starts a non-blocking connect to `host` (an IP literal or a name) and
/// `port`. Returns the socket, or an empty one with `error` set when the
/// name does not resolve or the connect fails at once.
UniqueFd connect_to(const std::string& host, int port, std::string& error);

/// After a non-blocking connect became writable: true when it connected,
/// else false with `error` set ("Connection refused").
bool connect_finished(int fd, std::string& error);

void tune_socket(int fd);

/// "10.0.0.12:41234" or "[fe80::1]:41234".
std::string address_text(const sockaddr_storage& addr);

/// Writes as much of `unsent` as the socket takes now and removes it from
/// `unsent`. false when the connection is gone.
bool flush_some(int fd, std::string& unsent);

}  // namespace davincirun::detail
