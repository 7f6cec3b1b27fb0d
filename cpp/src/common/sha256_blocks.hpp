// SHA-256's compression of whole 64-byte blocks (FIPS 180-4, 6.2.2), by
// two engines: portable C++, and the CPU's SHA instructions where it has
// them (x86-64's SHA extensions: Intel "SHA Extensions" white paper, 2013;
// Goldmont and Ice Lake on, AMD Zen on). The peer channel hashes every
// payload (peer_message.hpp); the instructions do it about 4x as fast.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace davincirun::detail {

using Sha256State = std::array<std::uint32_t, 8>;

/// Compresses `count` blocks at `p` into `state`, portably.
void sha256_blocks_portable(Sha256State& state, const unsigned char* p, std::size_t count) noexcept;

/// The same with the CPU's SHA instructions; only when sha256_cpu_engine() is true.
void sha256_blocks_cpu(Sha256State& state, const unsigned char* p, std::size_t count) noexcept;

/// Whether this CPU has the instructions sha256_blocks_cpu() uses (asked
/// once: CPUID on x86-64; false on other machines, which use the portable engine).
bool sha256_cpu_engine() noexcept;

}  // namespace davincirun::detail
