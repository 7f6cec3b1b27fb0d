// sha256_blocks_cpu() with the Armv8 SHA-2 instructions (sha256_blocks.hpp;
// the Cryptographic Extension's SHA256H, SHA256H2, SHA256SU0 and SHA256SU1,
// Arm ACLE's vsha256* intrinsics), where the CPU has them ("sha2" among
// /proc/cpuinfo's features). The state is kept as ABCD and EFGH; SHA256H/SHA256H2 each advance
// their half by four rounds, and the message schedule's next four words
// come from SHA256SU0/SHA256SU1.
#include "common/sha256_blocks.hpp"

#if DAVINCIRUN_SHA256_ARM_ENGINE

#include <arm_neon.h>
#include <sys/auxv.h>

namespace davincirun::detail {

namespace {

// GCC names the extension "crypto" (AES and SHA-2 together; arm_neon.h of
// GCC 12 puts the intrinsics under "+nothing+crypto"), Clang "sha2".
#if defined(__clang__)
#define DAVINCIRUN_SHA_TARGET __attribute__((target("sha2")))
#else
#define DAVINCIRUN_SHA_TARGET __attribute__((target("+crypto")))
#endif

// W[t..t+3] from the sixteen words before them: W[t-16] + s0(W[t-15]) +
// W[t-7] (SU0 and the first half of SU1), + s1(W[t-2]) (the rest of SU1).
DAVINCIRUN_SHA_TARGET inline uint32x4_t next_words(uint32x4_t w16, uint32x4_t w12, uint32x4_t w8,
                                                   uint32x4_t w4) noexcept {
  return vsha256su1q_u32(vsha256su0q_u32(w16, w12), w8, w4);
}

// Four rounds: message words plus constants into both halves of the state.
DAVINCIRUN_SHA_TARGET inline void four_rounds(uint32x4_t& abcd, uint32x4_t& efgh, uint32x4_t words,
                                              std::size_t group) noexcept {
  const uint32x4_t sum = vaddq_u32(words, vld1q_u32(sha256_round_constants + 4 * group));
  const uint32x4_t abcd_before = abcd;
  abcd = vsha256hq_u32(abcd, efgh, sum);
  efgh = vsha256h2q_u32(efgh, abcd_before, sum);
}

}  // namespace

DAVINCIRUN_SHA_TARGET void sha256_blocks_cpu(Sha256State& state, const unsigned char* p, std::size_t count) noexcept {
  uint32x4_t abcd = vld1q_u32(state.data());
  uint32x4_t efgh = vld1q_u32(state.data() + 4);
  for (; count > 0; --count, p += 64) {
    const uint32x4_t abcd_before = abcd;
    const uint32x4_t efgh_before = efgh;
    uint32x4_t w[4];
    for (std::size_t i = 0; i < 4; ++i) {
      w[i] = vreinterpretq_u32_u8(vrev32q_u8(vld1q_u8(p + 16 * i)));  // big-endian words
      four_rounds(abcd, efgh, w[i], i);
    }
    for (std::size_t group = 4; group < 16; ++group) {
      // w holds the last sixteen words, the oldest vector at group % 4.
      const std::size_t at = group % 4;
      w[at] = next_words(w[at], w[(at + 1) % 4], w[(at + 2) % 4], w[(at + 3) % 4]);
      four_rounds(abcd, efgh, w[at], group);
    }
    abcd = vaddq_u32(abcd, abcd_before);
    efgh = vaddq_u32(efgh, efgh_before);
  }
  vst1q_u32(state.data(), abcd);
  vst1q_u32(state.data() + 4, efgh);
}

bool sha256_cpu_engine() noexcept {
  // The kernel's hardware capabilities (asm/hwcap.h: HWCAP_SHA2 is bit 6 on arm64).
  constexpr unsigned long hwcap_sha2 = 1UL << 6;
  static const bool has = (::getauxval(AT_HWCAP) & hwcap_sha2) != 0;
  return has;
}

}  // namespace davincirun::detail

#endif
