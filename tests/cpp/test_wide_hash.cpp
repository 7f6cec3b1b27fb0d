// The table digest's hash (common/wide_hash.hpp): every server of a job must
// compute the same value from the same normalized table, whatever its
// machine, so its values are pinned here; and texts that differ by a byte,
// by their length or in their last, partial word hash apart.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "common/wide_hash.hpp"

using davincirun::detail::wide_hash64;

namespace {

std::string alphabet(std::size_t length) {
  std::string text;
  for (std::size_t i = 0; i < length; ++i) text += static_cast<char>('a' + i % 26);
  return text;
}

}  // namespace

TEST_CASE("the table digest's hash has the same values on every machine", "[wide_hash]") {
  // Computed once on x86_64; an aarch64 build must agree (words are read little-endian).
  CHECK(wide_hash64("") == 0x9e402f4140e5026dULL);
  CHECK(wide_hash64("rank table") == 0xc0026ba1396947ccULL);
  CHECK(wide_hash64(alphabet(1000)) == 0x20c2a38b1792ea7aULL);
}

TEST_CASE("texts a byte or a length apart hash apart", "[wide_hash]") {
  std::set<std::uint64_t> seen;
  std::size_t texts = 0;
  // Every length across the 32-byte steps and the 8-byte tail, each byte changed once.
  for (std::size_t length = 0; length <= 80; ++length) {
    const std::string base = alphabet(length);
    seen.insert(wide_hash64(base));
    ++texts;
    for (std::size_t i = 0; i < length; ++i) {
      std::string changed = base;
      changed[i] = static_cast<char>(changed[i] ^ 0x01);
      seen.insert(wide_hash64(changed));
      ++texts;
    }
    seen.insert(wide_hash64(base + std::string(1, '\0')));  // a NUL more is another text
    ++texts;
  }
  CHECK(seen.size() == texts);
  CHECK(wide_hash64(alphabet(64)) == wide_hash64(alphabet(64)));
}
