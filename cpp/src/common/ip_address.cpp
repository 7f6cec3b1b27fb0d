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

// The four bytes of a dotted quad, read as inet_pton(AF_INET) reads it
// (glibc's inet_pton4: four decimal parts of 0..255, no leading zero, no
// other character), without the copy into a C string inet_pton needs: a
// table of 65,536 device_ips reads each twice.
std::optional<std::array<unsigned char, 4>> dotted_quad_bytes(std::string_view text) {
  std::array<unsigned char, 4> out{};
  std::size_t part = 0, digits = 0;
  unsigned value = 0;
  for (const char c : text) {
    if (c >= '0' && c <= '9') {
      if (digits == 1 && value == 0) return std::nullopt;  // a leading zero
      value = value * 10 + static_cast<unsigned>(c - '0');
      if (value > 255) return std::nullopt;
      ++digits;
    } else if (c == '.' && digits > 0 && part < 3) {
      out[part++] = static_cast<unsigned char>(value);
      value = 0;
      digits = 0;
    } else {
      return std::nullopt;
    }
  }
  if (part != 3 || digits == 0) return std::nullopt;
  out[3] = static_cast<unsigned char>(value);
  return out;
}

// Whether inet_pton reads `text` as an address of `family` (it would stop at a NUL).
bool parses_as(int family, std::string_view text) {
  if (text.find('\0') != std::string_view::npos) return false;
  unsigned char bytes[sizeof(in6_addr)];
  return ::inet_pton(family, std::string(text).c_str(), bytes) == 1;
}

}  // namespace

std::optional<std::array<unsigned char, 16>> address_bytes(std::string_view text) {
  if (text.find(':') == std::string_view::npos) {  // not IPv6: a dotted quad or nothing
    const auto quad = dotted_quad_bytes(text);
    if (!quad) return std::nullopt;
    std::array<unsigned char, 16> bytes{};
    bytes[10] = bytes[11] = 0xff;  // ::ffff:a.b.c.d
    std::memcpy(&bytes[12], quad->data(), quad->size());
    return bytes;
  }
  if (text.find('\0') != std::string_view::npos) return std::nullopt;  // inet_pton would stop there
  // An IPv6 zone is dropped; what is left may still be a dotted quad ("1.2.3.4%a:b").
  const std::string address(text.substr(0, text.find('%')));
  std::array<unsigned char, 16> bytes{};
  in_addr v4{};
  if (::inet_pton(AF_INET, address.c_str(), &v4) == 1) {
    bytes[10] = bytes[11] = 0xff;  // ::ffff:a.b.c.d
    std::memcpy(&bytes[12], &v4, sizeof v4);
    return bytes;
  }
  in6_addr v6{};
  if (::inet_pton(AF_INET6, address.c_str(), &v6) != 1) return std::nullopt;
  std::memcpy(bytes.data(), &v6, bytes.size());
  return bytes;
}

std::optional<std::string> canonical_ip(std::string_view text) {
  const auto bytes = address_bytes(text);
  if (!bytes) return std::nullopt;
  in6_addr v6{};
  std::memcpy(&v6, bytes->data(), bytes->size());
  if (IN6_IS_ADDR_V4MAPPED(&v6)) {
    in_addr v4{};
    std::memcpy(&v4, &bytes->at(12), sizeof v4);
    return dotted_quad(v4);
  }
  char out[INET6_ADDRSTRLEN];
  return std::string(::inet_ntop(AF_INET6, &v6, out, sizeof out));
}

bool is_ip_address(std::string_view text) { return address_bytes(text).has_value(); }

bool is_ipv4_literal(std::string_view text) { return parses_as(AF_INET, text); }

bool is_ipv6_literal(std::string_view text) { return parses_as(AF_INET6, text); }

std::string address_key(std::string_view text) { return canonical_ip(text).value_or(std::string(text)); }

}  // namespace davincirun::detail
