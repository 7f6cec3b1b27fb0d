#include "common/wide_hash.hpp"

#include <cstring>

namespace davincirun::detail {

namespace {

// Odd 64-bit constants with well-spread bits (the fractional parts of the
// golden ratio and of sqrt(2), sqrt(3)): multiplying by one is a bijection
// that carries each bit upwards; the rotation carries the high bits back down.
constexpr std::uint64_t k1 = 0x9E3779B97F4A7C15ULL;
constexpr std::uint64_t k2 = 0x6A09E667F3BCC909ULL;
constexpr std::uint64_t k3 = 0xBB67AE8584CAA73BULL;

std::uint64_t word(const char* p) noexcept {
  std::uint64_t w = 0;
  std::memcpy(&w, p, sizeof w);  // little-endian on every platform built for
  return w;
}

constexpr std::uint64_t rotl(std::uint64_t x, int r) noexcept { return (x << r) | (x >> (64 - r)); }

constexpr std::uint64_t step(std::uint64_t lane, std::uint64_t w) noexcept { return rotl((lane ^ w) * k1, 29) * k2; }

// Every input bit reaches every output bit.
constexpr std::uint64_t finish(std::uint64_t h) noexcept {
  h ^= h >> 31;
  h *= k3;
  h ^= h >> 29;
  h *= k1;
  return h ^ (h >> 32);
}

}  // namespace

std::uint64_t wide_hash64(std::string_view bytes) noexcept {
  const char* p = bytes.data();
  std::size_t left = bytes.size();
  std::uint64_t a = k1, b = k2, c = k3, d = ~k1;
  for (; left >= 32; p += 32, left -= 32) {
    a = step(a, word(p));
    b = step(b, word(p + 8));
    c = step(c, word(p + 16));
    d = step(d, word(p + 24));
  }
  std::uint64_t h = rotl(a, 1) ^ rotl(b, 7) ^ rotl(c, 12) ^ rotl(d, 18);
  h = step(h, bytes.size());
  for (; left >= 8; p += 8, left -= 8) h = step(h, word(p));
  if (left > 0) {
    char tail[8] = {};
    std::memcpy(tail, p, left);
    h = step(h, word(tail) ^ (std::uint64_t{left} << 59));
  }
  return finish(h);
}

}  // namespace davincirun::detail
