#include "common/sha256.hpp"

#include <algorithm>
#include <cstring>

#include "common/sha256_blocks.hpp"

namespace davincirun::detail {

namespace {

constexpr std::uint32_t rotr(std::uint32_t x, int n) noexcept { return (x >> n) | (x << (32 - n)); }

}  // namespace

Sha256::Sha256() noexcept
    : h_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19} {}

void sha256_blocks_portable(Sha256State& state, const unsigned char* p, std::size_t count) noexcept {
  for (; count > 0; --count, p += 64) {
    std::uint32_t w[64];
    for (std::size_t i = 0; i < 16; ++i) {
      const unsigned char* b = p + 4 * i;
      w[i] =
          (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | std::uint32_t{b[3]};
    }
    for (int i = 16; i < 64; ++i) {
      const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    std::uint32_t a = state[0], b = state[1], c = state[2], d = state[3], e = state[4], f = state[5], g = state[6],
                  h = state[7];
    for (int i = 0; i < 64; ++i) {
      const std::uint32_t t1 =
          h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + sha256_round_constants[i] + w[i];
      const std::uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state[0] += a, state[1] += b, state[2] += c, state[3] += d, state[4] += e, state[5] += f, state[6] += g,
        state[7] += h;
  }
}

void Sha256::blocks(const unsigned char* p, std::size_t count) noexcept {
  static const auto engine = sha256_cpu_engine() ? sha256_blocks_cpu : sha256_blocks_portable;
  engine(h_, p, count);
}

void Sha256::update(const unsigned char* bytes, std::size_t size) noexcept {
  total_ += size;
  if (buffered_ > 0) {
    const std::size_t take = std::min(size, buffer_.size() - buffered_);
    std::memcpy(buffer_.data() + buffered_, bytes, take);
    buffered_ += take;
    bytes += take;
    size -= take;
    if (buffered_ < buffer_.size()) return;
    blocks(buffer_.data(), 1);
    buffered_ = 0;
  }
  // Whole blocks straight from the input; the rest waits in the buffer.
  if (size >= 64) blocks(bytes, size / 64);
  buffered_ = size % 64;
  if (buffered_ > 0) std::memcpy(buffer_.data(), bytes + (size - buffered_), buffered_);
}

void Sha256::update(std::string_view bytes) noexcept {
  update(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

Digest Sha256::finish() noexcept {
  const std::uint64_t bits = total_ * 8;
  const unsigned char one = 0x80;
  update(&one, 1);
  const unsigned char zero = 0;
  while (buffered_ != 56) update(&zero, 1);
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
  update(length, sizeof length);
  Digest out{};
  for (std::size_t i = 0; i < 8; ++i) {
    for (std::size_t j = 0; j < 4; ++j) out[4 * i + j] = static_cast<unsigned char>(h_[i] >> (24 - 8 * j));
  }
  return out;
}

Digest sha256(std::string_view bytes) noexcept {
  Sha256 s;
  s.update(bytes);
  return s.finish();
}

Digest hmac_sha256(std::string_view key, std::initializer_list<std::string_view> parts) noexcept {
  std::array<unsigned char, 64> block{};
  if (key.size() > block.size()) {
    const Digest d = sha256(key);
    std::memcpy(block.data(), d.data(), d.size());
  } else {
    std::memcpy(block.data(), key.data(), key.size());
  }
  std::array<unsigned char, 64> pad{};
  for (std::size_t i = 0; i < pad.size(); ++i) pad[i] = block[i] ^ 0x36;
  Sha256 inner;
  inner.update(pad.data(), pad.size());
  for (const auto part : parts) inner.update(part);
  const Digest inner_digest = inner.finish();
  for (std::size_t i = 0; i < pad.size(); ++i) pad[i] = block[i] ^ 0x5c;
  Sha256 outer;
  outer.update(pad.data(), pad.size());
  outer.update(inner_digest.data(), inner_digest.size());
  return outer.finish();
}

bool digests_equal(const unsigned char* a, const unsigned char* b, std::size_t size) noexcept {
  unsigned char diff = 0;
  for (std::size_t i = 0; i < size; ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace davincirun::detail
