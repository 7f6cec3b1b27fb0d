// SHA-256's block engines on another CPU (scripts/check_sha256_engines.sh
// builds this for aarch64 and runs it under qemu-user): the CPU engine must
// agree with the portable one on pseudo-random blocks, and the hash with
// FIPS 180-4's examples. Prints which engine ran; exits 1 on a mismatch.
#include <cstdio>
#include <string>

#include "common/sha256.hpp"
#include "common/sha256_blocks.hpp"

using namespace davincirun::detail;

namespace {

std::string hex(const Digest& d) {
  std::string out;
  char byte[3];
  for (unsigned char c : d) {
    std::snprintf(byte, sizeof byte, "%02x", c);
    out += byte;
  }
  return out;
}

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) ++failures;
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what);
}

}  // namespace

int main() {
  std::uint64_t x = 0x9E3779B97F4A7C15ull;  // the C++ suite's seed (test_peer_message.cpp)
  std::string bytes(64 * 257, '\0');
  for (auto& c : bytes) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x);
  }
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const bool cpu = sha256_cpu_engine();
  std::printf("engine: %s\n", cpu ? "the CPU's SHA instructions" : "portable (no SHA instructions)");
  if (cpu) {
    Sha256State portable{1, 2, 3, 4, 5, 6, 7, 0xffffffffu};
    Sha256State fast = portable;
    sha256_blocks_portable(portable, p, 257);
    sha256_blocks_cpu(fast, p, 257);
    check(fast == portable, "257 blocks at once, both engines");
    for (std::size_t n = 0; n < 4; ++n) {
      Sha256State a{}, b{};
      sha256_blocks_portable(a, p + 64 * n, 1);
      sha256_blocks_cpu(b, p + 64 * n, 1);
      check(a == b, "one block, both engines");
    }
  }
  check(hex(sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "FIPS 180-4 \"abc\"");
  check(hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
        "FIPS 180-4 two blocks");
  return failures == 0 ? 0 : 1;
}
