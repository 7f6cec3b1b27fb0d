#include "peers/peer_socket.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "davincirun/errors.hpp"

namespace davincirun::detail {

UniqueFd listen_on(const std::string& address, int port) {
  in6_addr probe{};
  const bool v6 = ::inet_pton(AF_INET6, address.c_str(), &probe) == 1;
  UniqueFd fd(::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) throw SystemError("socket", errno);
  const int on = 1;
  // A previous job's connections in TIME_WAIT must not keep the port.
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  int rc = 0;
  if (v6) {
    const int off = 0;
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<std::uint16_t>(port));
    a.sin6_addr = in6addr_any;
    rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc != 0 && errno == EADDRINUSE) {
    throw ConfigError(
        fmt::format("the peer channel's port {} is already in use on this machine (the server of rank 0, where "
                    "the agents of the job meet): set DAVINCIRUN_PEER_PORT (or --peer-port) to a free port, on "
                    "every server alike, or end what holds it (ss -ltnp 'sport = :{}' names it)",
                    port, port));
  }
  if (rc != 0) throw SystemError(fmt::format("bind port {}", port), errno);
  if (::listen(fd.get(), 1024) != 0) throw SystemError("listen", errno);
  return fd;
}

UniqueFd connect_to(const std::string& host, int port, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    error = fmt::format("cannot resolve {}: {}", host, ::gai_strerror(rc));
    return {};
  }
  UniqueFd result;
  for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (!fd) continue;
    tune_socket(fd.get());
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0 || errno == EINPROGRESS) {
      result = std::move(fd);
      break;
    }
    error = std::strerror(errno);
  }
  ::freeaddrinfo(found);
  return result;
}

bool connect_finished(int fd, std::string& error) {
  int so_error = 0;
  socklen_t len = sizeof so_error;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) so_error = errno;
  if (so_error == 0) return true;
  error = std::strerror(so_error);
  return false;
}

void tune_socket(int fd) {
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

std::string address_text(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (addr.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(addr);
    ::inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
    return fmt::format("{}:{}", text, ntohs(a.sin_port));
  }
  if (addr.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(addr);
    ::inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
    return fmt::format("[{}]:{}", text, ntohs(a.sin6_port));
  }
  return "?";
}

bool flush_some(int fd, std::string& unsent) {
  std::size_t sent = 0;
  while (sent < unsent.size()) {
    const ssize_t n = ::send(fd, unsent.data() + sent, unsent.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    unsent.clear();
    return false;
  }
  unsent.erase(0, sent);
  return true;
}

}  // namespace davincirun::detail
