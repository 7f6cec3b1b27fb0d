#include "job/lifeline_frames.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "davincirun/errors.hpp"

namespace davincirun::detail {

namespace {

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

}  // namespace davincirun::detail
