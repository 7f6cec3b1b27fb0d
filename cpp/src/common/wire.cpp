#include "common/wire.hpp"

#include <cerrno>
#include <limits>

#include <fmt/format.h>

#include "davincirun/errors.hpp"

namespace davincirun::detail {

namespace {

constexpr const char* malformed_message = "malformed message between the launcher and its job supervisor process";

[[noreturn]] void malformed() { throw SystemError(malformed_message, EPROTO); }

}  // namespace

void Writer::raw_u64(std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
}

void Writer::raw_str(std::string_view v) {
  raw_u64(v.size());
  out_.append(v);
}

void Writer::u64(std::uint64_t v) {
  type(WireType::u64);
  raw_u64(v);
}

void Writer::i64(std::int64_t v) {
  type(WireType::i64);
  raw_u64(static_cast<std::uint64_t>(v));
}

void Writer::flag(bool v) {
  type(WireType::flag);
  out_ += v ? '\1' : '\0';
}

void Writer::str(std::string_view v) {
  type(WireType::str);
  raw_str(v);
}

void Writer::strs(const std::vector<std::string>& v) {
  type(WireType::strs);
  raw_u64(v.size());
  for (const auto& s : v) raw_str(s);
}

void Writer::opt_str(const std::optional<std::string>& v) {
  type(WireType::opt_str);
  out_ += v ? '\1' : '\0';
  if (v) raw_str(*v);
}

void Writer::millis(std::chrono::milliseconds v) {
  type(WireType::millis);
  raw_u64(static_cast<std::uint64_t>(v.count()));
}

void Writer::time(std::chrono::system_clock::time_point t) {
  type(WireType::time);
  raw_u64(
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count()));
}

void Writer::count(std::size_t n) {
  type(WireType::count);
  raw_u64(n);
}

void Writer::enumeration(std::uint64_t v) {
  type(WireType::enumeration);
  raw_u64(v);
}

void Writer::optional(bool present) {
  type(WireType::optional);
  out_ += present ? '\1' : '\0';
}

void Reader::type(WireType expected) {
  need(1);
  const auto found = static_cast<WireType>(static_cast<unsigned char>(data_[pos_]));
  if (found != expected) {
    // A value read in another order than it was written, or garbage.
    const std::string what = enum_valid<WireType>(static_cast<long long>(found))
                                 ? std::string(to_string(found))
                                 : fmt::format("type byte {}", static_cast<int>(found));
    throw SystemError(fmt::format("{}: expected {}, found {}", malformed_message, to_string(expected), what), EPROTO);
  }
  ++pos_;
}

std::uint64_t Reader::raw_u64() {
  need(8);
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(data_[pos_ + i])) << (8 * i);
  }
  pos_ += 8;
  return v;
}

std::string Reader::raw_str() {
  const std::uint64_t n = raw_u64();
  need(n);
  std::string v(data_.substr(pos_, n));
  pos_ += n;
  return v;
}

bool Reader::raw_flag() {
  need(1);
  const char c = data_[pos_++];
  check(c == '\0' || c == '\1');
  return c != '\0';
}

std::size_t Reader::raw_count() {
  const std::uint64_t n = raw_u64();
  need(n);  // each element takes a byte at least
  return static_cast<std::size_t>(n);
}

std::uint64_t Reader::u64() {
  type(WireType::u64);
  return raw_u64();
}

std::int64_t Reader::i64() {
  type(WireType::i64);
  return static_cast<std::int64_t>(raw_u64());
}

int Reader::i32() {
  const std::int64_t v = i64();
  check(v >= std::numeric_limits<int>::min() && v <= std::numeric_limits<int>::max());
  return static_cast<int>(v);
}

bool Reader::flag() {
  type(WireType::flag);
  return raw_flag();
}

std::string Reader::str() {
  type(WireType::str);
  return raw_str();
}

std::vector<std::string> Reader::strs() {
  type(WireType::strs);
  std::vector<std::string> v(raw_count());
  for (auto& s : v) s = raw_str();
  return v;
}

std::optional<std::string> Reader::opt_str() {
  type(WireType::opt_str);
  if (!raw_flag()) return std::nullopt;
  return raw_str();
}

std::chrono::milliseconds Reader::millis() {
  type(WireType::millis);
  return std::chrono::milliseconds(static_cast<std::int64_t>(raw_u64()));
}

std::chrono::system_clock::time_point Reader::time() {
  type(WireType::time);
  return std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::nanoseconds(static_cast<std::int64_t>(raw_u64()))));
}

std::size_t Reader::count() {
  type(WireType::count);
  return raw_count();
}

std::uint64_t Reader::enumeration() {
  type(WireType::enumeration);
  return raw_u64();
}

bool Reader::optional() {
  type(WireType::optional);
  return raw_flag();
}

std::string_view Reader::rest() noexcept {
  const std::string_view out = data_.substr(pos_);
  pos_ = data_.size();
  return out;
}

void Reader::finish() const {
  if (pos_ != data_.size()) malformed();
}

void Reader::check(bool ok) {
  if (!ok) malformed();
}

void Reader::need(std::uint64_t n) const {
  if (n > data_.size() - pos_) malformed();
}

}  // namespace davincirun::detail
