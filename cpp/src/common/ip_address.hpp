// IP address literals compared as addresses, in one place: the rank table's
// uniqueness rules and the search for this machine's server must agree on
// whether two texts name the same address.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace davincirun::detail {

/// The canonical text of an IPv4 or IPv6 literal (inet_pton, then
/// inet_ntop: "0:0::1" is "::1"), or nullopt when `text` is not one.
/// An IPv6 zone ("fe80::1%eth0") is dropped: it names an interface, not
/// another address. An IPv4-mapped IPv6 address ("::ffff:10.0.0.1") is the
/// IPv4 address it carries ("10.0.0.1").
std::optional<std::string> canonical_ip(std::string_view text);

/// The 16 bytes of the address canonical_ip(text) names (IPv4 as an
/// IPv4-mapped IPv6 address), nullopt when it names none: equal bytes, equal
/// canonical texts, with no text made.
std::optional<std::array<unsigned char, 16>> address_bytes(std::string_view text);

/// Whether canonical_ip(text) is an address, without making its text.
bool is_ip_address(std::string_view text);

/// Whether `text` is a plain IPv4 (dotted quad) or IPv6 literal, as
/// inet_pton reads it: no zone, and an IPv4-mapped IPv6 address is IPv6.
bool is_ipv4_literal(std::string_view text);
bool is_ipv6_literal(std::string_view text);

/// `text`'s canonical address when it is an IP literal, else `text` itself:
/// the key under which host names and addresses are compared.
std::string address_key(std::string_view text);

}  // namespace davincirun::detail
