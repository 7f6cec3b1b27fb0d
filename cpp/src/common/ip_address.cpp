#include "common/ip_address.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace davincirun::detail {

namespace {

// "10.0.0.1": what inet_ntop writes, without its formatted printing (a
// table of 65,536 device_ips canonicalizes each twice).
std::string dotted_quad(const in_addr& address) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(&address.s_addr);
  std::string out;
  for (int i = 0; i < 4; ++i) {
    if (i > 0) out += '.';
    const unsigned value = bytes[i];
    if (value >= 100) out += static_cast<char>('0' + value / 100);
    if (value >= 10) out += static_cast<char>('0' + value / 10 % 10);
    out += static_cast<char>('0' + value % 10);
  }
  return out;
}

}  // namespace

std::optional<std::string> canonical_ip(std::string_view text) {
  if (text.find('\0') != std::string_view::npos) return std::nullopt;  // inet_pton would stop there
  std::string address(text);
  if (address.find(':') != std::string::npos) address = address.substr(0, address.find('%'));
  char out[INET6_ADDRSTRLEN];
  in_addr v4{};
  in6_addr v6{};
  if (::inet_pton(AF_INET, address.c_str(), &v4) != 1) {
    if (::inet_pton(AF_INET6, address.c_str(), &v6) != 1) return std::nullopt;
    if (!IN6_IS_ADDR_V4MAPPED(&v6)) return std::string(::inet_ntop(AF_INET6, &v6, out, sizeof out));
    std::memcpy(&v4, &v6.s6_addr[12], sizeof v4);
  }
  return dotted_quad(v4);
}

bool is_ip_address(std::string_view text) {
  if (text.find('\0') != std::string_view::npos) return false;
  std::string address(text);
  if (address.find(':') != std::string::npos) address = address.substr(0, address.find('%'));
  in_addr v4{};
  in6_addr v6{};
  return ::inet_pton(AF_INET, address.c_str(), &v4) == 1 || ::inet_pton(AF_INET6, address.c_str(), &v6) == 1;
}

std::string address_key(std::string_view text) { return canonical_ip(text).value_or(std::string(text)); }

}  // namespace davincirun::detail
