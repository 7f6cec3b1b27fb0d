// A fast 64-bit digest of long texts (the normalized rank table: 8 MB at
// 65,536 ranks), for telling equal texts from different ones across servers;
// not for adversaries. Reads 32 bytes a step in four independent lanes: 8 MiB
// in 0.6 ms here, where FNV-1a, a byte at a time, takes 8.3 ms.
#pragma once

#include <cstdint>
#include <string_view>

namespace davincirun::detail {

/// The digest of `bytes`: the same on every machine and in every run (words
/// are read little-endian, as on x86_64 and aarch64 Linux).
std::uint64_t wide_hash64(std::string_view bytes) noexcept;

}  // namespace davincirun::detail
