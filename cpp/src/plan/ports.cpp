// Ports the ranks rendezvous on: a free one on a single server, one derived
// alike on every server otherwise, and the check that it is not taken.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "davincirun/environment.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/plan.hpp"
#include "davincirun/unique_fd.hpp"

namespace davincirun {

std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t seed) noexcept {
  std::uint64_t hash = seed;
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;
  }
  return hash;
}

int parse_port(std::string_view name, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long port = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || port < 1 || port > 65535) {
    throw ConfigError(fmt::format("{} must be a TCP port number (1-65535), got '{}'", name, text));
  }
  return static_cast<int>(port);
}

namespace {

// A socket bound to a port the kernel chose on `host` (loopback when `host`
// is not an IPv4 literal), and that port.
std::pair<UniqueFd, int> bind_free_port(const std::string& host) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw SystemError("socket", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    throw SystemError("bind " + host + ":0", errno);
  }
  socklen_t len = sizeof addr;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) throw SystemError("getsockname", errno);
  return {std::move(fd), ntohs(addr.sin_port)};
}

}  // namespace

int find_free_port(const std::string& host) { return bind_free_port(host).second; }

std::vector<int> find_free_ports(const std::string& host, std::size_t count) {
  std::vector<UniqueFd> held;
  std::vector<int> ports;
  for (std::size_t i = 0; i < count; ++i) {
    auto [fd, port] = bind_free_port(host);
    held.push_back(std::move(fd));
    ports.push_back(port);
  }
  return ports;
}

int derived_port(std::string_view table_json, std::string_view job_id, std::string_view purpose) {
  // Each part ends with a NUL so that ("ab", "c") and ("a", "bc") differ.
  std::uint64_t hash = fnv1a64(table_json);
  hash = fnv1a64(std::string_view("\0", 1), hash);
  hash = fnv1a64(job_id, hash);
  hash = fnv1a64(std::string_view("\0", 1), hash);
  hash = fnv1a64(purpose, hash);
  constexpr std::uint64_t span =
      static_cast<std::uint64_t>(last_derived_port) - static_cast<std::uint64_t>(first_derived_port) + 1;
  return first_derived_port + static_cast<int>(hash % span);
}

int port_for_attempt(const AttemptPorts& ports, std::string_view job_id, std::string_view name, int attempt) {
  if (ports.seed.empty()) return find_free_port(ports.host);
  return derived_port(ports.seed, job_id, fmt::format("{}@{}", name, attempt));
}

void check_port_free(int port, std::string_view variable, std::string_view whose) {
  const UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return;
  const int on = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 || errno != EADDRINUSE) return;
  throw ConfigError(
      fmt::format("{} {} is already in use on this machine ({}): another job or program listens "
                  "on it, and the ranks would fail to rendezvous; set {} to a free port (on every "
                  "server alike), or end what holds it (ss -ltnp 'sport = :{}' names it)",
                  variable, port, whose, variable, port));
}

}  // namespace davincirun
