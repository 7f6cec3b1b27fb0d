// The byte stream child_write writes and the tests regenerate: xorshift32
// seeded with 42, one byte per step. It holds NULs, '\n', '\r' and bytes
// that are not valid UTF-8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace davincirun_test {

inline std::string pattern_bytes(std::size_t size) {
  std::string out(size, '\0');
  std::uint32_t x = 42;
  for (auto& c : out) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = static_cast<char>(x & 0xff);
  }
  return out;
}

}  // namespace davincirun_test
