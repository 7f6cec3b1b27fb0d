// SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104): the job key a plan
// derives (peer_plan.cpp) and the peer channel's message authentication
// (peer_message.hpp). Small and dependency-free so that the wheels link no
// crypto library; checked against the FIPS 180-4 examples and the RFC 4231
// test cases (tests/cpp/test_peer_message.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace davincirun::detail {

using Digest = std::array<unsigned char, 32>;

class Sha256 {
 public:
  Sha256() noexcept;
  void update(std::string_view bytes) noexcept;
  void update(const unsigned char* bytes, std::size_t size) noexcept;
  /// The digest; the object must not be updated afterwards.
  Digest finish() noexcept;

 private:
  void blocks(const unsigned char* p, std::size_t count) noexcept;
  std::array<std::uint32_t, 8> h_;
  std::array<unsigned char, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t total_ = 0;  // bytes
};

Digest sha256(std::string_view bytes) noexcept;

/// HMAC-SHA-256 of the concatenation of `parts` under `key` (any length).
Digest hmac_sha256(std::string_view key, std::initializer_list<std::string_view> parts) noexcept;

/// Compares in time independent of where the first difference is.
bool digests_equal(const unsigned char* a, const unsigned char* b, std::size_t size) noexcept;

inline std::string_view as_view(const Digest& d) noexcept {
  return {reinterpret_cast<const char*>(d.data()), d.size()};
}

}  // namespace davincirun::detail
