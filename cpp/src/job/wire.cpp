#include "job/wire.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "davincirun/errors.hpp"

namespace davincirun::detail {

namespace {

[[noreturn]] void malformed() {
  throw SystemError("malformed message between the launcher and its job supervisor process", EPROTO);
}

// Sends all of `data`; false when the peer is gone.
bool send_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t sent = ::send(fd, data, size, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EPIPE || errno == ECONNRESET) return false;
      throw SystemError("send to the job's lifeline socket", errno);
    }
    data += sent;
    size -= static_cast<std::size_t>(sent);
  }
  return true;
}

}  // namespace

void Writer::u64(std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
}

void Writer::str(std::string_view v) {
  u64(v.size());
  out_.append(v);
}

void Writer::strs(const std::vector<std::string>& v) {
  u64(v.size());
  for (const auto& s : v) str(s);
}

void Writer::opt_str(const std::optional<std::string>& v) {
  flag(v.has_value());
  if (v) str(*v);
}

void Writer::time(std::chrono::system_clock::time_point t) {
  i64(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}

std::uint64_t Reader::u64() {
  need(8);
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(data_[pos_ + i])) << (8 * i);
  }
  pos_ += 8;
  return v;
}

int Reader::i32() { return static_cast<int>(i64()); }

bool Reader::flag() {
  need(1);
  return data_[pos_++] != '\0';
}

std::string Reader::str() {
  const std::uint64_t n = u64();
  need(n);
  std::string v(data_.substr(pos_, n));
  pos_ += n;
  return v;
}

std::vector<std::string> Reader::strs() {
  std::vector<std::string> v(count());
  for (auto& s : v) s = str();
  return v;
}

std::optional<std::string> Reader::opt_str() {
  if (!flag()) return std::nullopt;
  return str();
}

std::chrono::system_clock::time_point Reader::time() {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(i64())));
}

std::size_t Reader::count() {
  const std::uint64_t n = u64();
  if (n > data_.size() - pos_) malformed();
  return static_cast<std::size_t>(n);
}

std::string_view Reader::rest() noexcept {
  const std::string_view out = data_.substr(pos_);
  pos_ = data_.size();
  return out;
}

void Reader::finish() const {
  if (pos_ != data_.size()) malformed();
}

void Reader::check(bool ok) const {
  if (!ok) malformed();
}

void Reader::need(std::uint64_t n) const {
  if (n > data_.size() - pos_) malformed();
}

bool write_frame(int fd, Frame type, std::string_view head, std::string_view body) {
  constexpr std::size_t copy_limit = 4096;  // parts above this are sent without a copy
  std::string frame(5, '\0');
  frame[0] = static_cast<char>(type);
  const auto n = static_cast<std::uint32_t>(head.size() + body.size());
  for (std::size_t i = 0; i < 4; ++i) frame[1 + i] = static_cast<char>((n >> (8 * i)) & 0xff);
  if (head.size() + body.size() <= copy_limit) {  // the common case: one call
    frame.append(head);
    frame.append(body);
    return send_all(fd, frame.data(), frame.size());
  }
  if (head.size() <= copy_limit) {
    frame.append(head);
    head = {};
  }
  return send_all(fd, frame.data(), frame.size()) && send_all(fd, head.data(), head.size()) &&
         send_all(fd, body.data(), body.size());
}

bool FrameReader::fill(std::size_t wanted) {
  while (buffer_.size() - start_ < wanted) {
    if (start_ > 0 && start_ == buffer_.size()) {
      buffer_.clear();
      start_ = 0;
    }
    char chunk[64 * 1024];
    const ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ECONNRESET) return false;
      throw SystemError("read from the job's lifeline socket", errno);
    }
    if (n == 0) return false;
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
  return true;
}

std::string FrameReader::take_buffered() {
  std::string rest = buffer_.substr(start_);
  buffer_.clear();
  start_ = 0;
  return rest;
}

bool FrameReader::next(Frame& type, std::string& payload) {
  if (!fill(5)) {
    if (buffer_.size() == start_) return false;
    throw SystemError("the job supervisor process ended in the middle of a message", EPIPE);
  }
  type = static_cast<Frame>(buffer_[start_]);
  std::uint32_t n = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    n |= static_cast<std::uint32_t>(static_cast<unsigned char>(buffer_[start_ + 1 + i])) << (8 * i);
  }
  if (n > max_frame_bytes) throw SystemError("a message from the job supervisor process is too large", EPROTO);
  if (!fill(5 + static_cast<std::size_t>(n))) {
    throw SystemError("the job supervisor process ended in the middle of a message", EPIPE);
  }
  payload.assign(buffer_, start_ + 5, n);
  start_ += 5 + n;
  if (start_ == buffer_.size()) {
    buffer_.clear();
    start_ = 0;
  } else if (start_ > (1U << 20)) {
    buffer_.erase(0, start_);
    start_ = 0;
  }
  return true;
}

void put_status(Writer& w, const ExitStatus& status) {
  w.i64(static_cast<int>(status.kind));
  w.i64(status.value);
}

ExitStatus get_status(Reader& r) {
  ExitStatus status;
  const int kind = r.i32();
  r.check(kind >= 0 && kind <= static_cast<int>(ExitStatus::Kind::unknown));
  status.kind = static_cast<ExitStatus::Kind>(kind);
  status.value = r.i32();
  return status;
}

}  // namespace davincirun::detail
