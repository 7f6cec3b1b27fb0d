#include "common/random_bytes.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "davincirun/errors.hpp"
#include "davincirun/unique_fd.hpp"

namespace davincirun::detail {

namespace {

// false when the kernel lacks getrandom (before Linux 3.17).
bool fill_by_getrandom(char* buf, std::size_t size) {
#ifdef SYS_getrandom
  for (std::size_t got = 0; got < size;) {
    const long n = ::syscall(SYS_getrandom, buf + got, size - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ENOSYS) return false;
    if (n < 0) throw SystemError("getrandom", errno);
    got += static_cast<std::size_t>(n);
  }
  return true;
#else
  (void)buf;
  (void)size;
  return false;
#endif
}

void fill_by_urandom(char* buf, std::size_t size) {
  const UniqueFd fd(::open("/dev/urandom", O_RDONLY | O_CLOEXEC));
  if (!fd) throw SystemError("open /dev/urandom", errno);
  for (std::size_t got = 0; got < size;) {
    const ssize_t n = ::read(fd.get(), buf + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw SystemError("read /dev/urandom", n < 0 ? errno : EIO);
    got += static_cast<std::size_t>(n);
  }
}

}  // namespace

std::string random_bytes(std::size_t size) {
  std::string out(size, '\0');
  if (!fill_by_getrandom(out.data(), size)) fill_by_urandom(out.data(), size);
  return out;
}

}  // namespace davincirun::detail
