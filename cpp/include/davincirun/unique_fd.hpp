// An owning file descriptor: closed exactly once, by its last owner.
#pragma once

#include <unistd.h>

#include <utility>

namespace davincirun {

/// Move-only owner of one file descriptor (-1: none). The destructor closes it.
class UniqueFd {
 public:
  UniqueFd() noexcept = default;
  /// Takes ownership of `fd` (may be -1, e.g. straight from a failed call).
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  /// Gives up ownership: the caller closes the descriptor.
  int release() noexcept { return std::exchange(fd_, -1); }
  /// Closes the descriptor held (if any) and takes `fd`.
  void reset(int fd = -1) noexcept {
    // close() is not retried on EINTR: on Linux the descriptor is gone anyway.
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace davincirun
