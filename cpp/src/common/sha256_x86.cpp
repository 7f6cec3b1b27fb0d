// sha256_blocks_cpu() with x86-64's SHA extensions (sha256_blocks.hpp).
// The state is kept as two vectors, ABEF and CDGH, the layout
// SHA256RNDS2 takes; each SHA256RNDS2 does two rounds, and the message
// schedule's next four words come from SHA256MSG1/SHA256MSG2.
#include "common/sha256_blocks.hpp"

#if defined(__x86_64__)

#include <cpuid.h>
#include <immintrin.h>

namespace davincirun::detail {

namespace {

#define DAVINCIRUN_SHA_TARGET __attribute__((target("sha,sse4.1,ssse3")))

// Four rounds: message words plus constants, two rounds into each half.
DAVINCIRUN_SHA_TARGET inline void four_rounds(__m128i& abef, __m128i& cdgh, __m128i words, std::size_t group) noexcept {
  __m128i sum =
      _mm_add_epi32(words, _mm_load_si128(reinterpret_cast<const __m128i*>(sha256_round_constants + 4 * group)));
  cdgh = _mm_sha256rnds2_epu32(cdgh, abef, sum);  // now the new ABEF
  sum = _mm_shuffle_epi32(sum, 0x0E);             // the other two words
  abef = _mm_sha256rnds2_epu32(abef, cdgh, sum);  // two rounds on: ABEF, and CDGH is the one before
}

// W[t..t+3] from the sixteen words before them: W[t-16] + s0(W[t-15])
// (MSG1), + W[t-7..t-4] (the two newest vectors shifted one word), then
// s1 of the two before (MSG2).
DAVINCIRUN_SHA_TARGET inline __m128i next_words(__m128i w16, __m128i w12, __m128i w8, __m128i w4) noexcept {
  const __m128i partial = _mm_add_epi32(_mm_sha256msg1_epu32(w16, w12), _mm_alignr_epi8(w4, w8, 4));
  return _mm_sha256msg2_epu32(partial, w4);
}

}  // namespace

DAVINCIRUN_SHA_TARGET void sha256_blocks_cpu(Sha256State& state, const unsigned char* p, std::size_t count) noexcept {
  // Big-endian words of the block, as the rounds want them.
  const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  const __m128i abcd =
      _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state.data())), 0xB1);  // CDAB
  const __m128i efgh =
      _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state.data() + 4)), 0x1B);  // EFGH
  __m128i abef = _mm_alignr_epi8(abcd, efgh, 8);
  __m128i cdgh = _mm_blend_epi16(efgh, abcd, 0xF0);
  for (; count > 0; --count, p += 64) {
    const __m128i abef_before = abef;
    const __m128i cdgh_before = cdgh;
    __m128i w[4];
    for (std::size_t i = 0; i < 4; ++i) {
      w[i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i)), byte_swap);
      four_rounds(abef, cdgh, w[i], i);
    }
    for (std::size_t group = 4; group < 16; ++group) {
      // w holds the last sixteen words, the oldest vector at group % 4.
      const std::size_t at = group % 4;
      w[at] = next_words(w[at], w[(at + 1) % 4], w[(at + 2) % 4], w[(at + 3) % 4]);
      four_rounds(abef, cdgh, w[at], group);
    }
    abef = _mm_add_epi32(abef, abef_before);
    cdgh = _mm_add_epi32(cdgh, cdgh_before);
  }
  const __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
  const __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state.data()),
                   _mm_blend_epi16(feba, dchg, 0xF0));  // DCBA: a first in memory
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state.data() + 4), _mm_alignr_epi8(dchg, feba, 8));  // HGFE: e first
}

bool sha256_cpu_engine() noexcept {
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
    const bool sse = (c & bit_SSE4_1) != 0 && (c & bit_SSSE3) != 0;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
    return sse && (b & bit_SHA) != 0;
  }();
  return has;
}

}  // namespace davincirun::detail

#elif !DAVINCIRUN_SHA256_ARM_ENGINE  // else sha256_arm.cpp serves aarch64

namespace davincirun::detail {

void sha256_blocks_cpu(Sha256State& state, const unsigned char* p, std::size_t count) noexcept {
  sha256_blocks_portable(state, p, count);
}

bool sha256_cpu_engine() noexcept { return false; }

}  // namespace davincirun::detail

#endif
