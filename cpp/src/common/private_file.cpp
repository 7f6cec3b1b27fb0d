#include "common/private_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "davincirun/errors.hpp"
#include "davincirun/unique_fd.hpp"

namespace davincirun::detail {

void write_private_file(const std::string& path, const std::string& text, const std::string& what) {
  UniqueFd file(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!file) throw SystemError(what, errno);
  const auto fail = [&](int error) {
    file.reset();
    ::unlink(path.c_str());  // ours: created above
    throw SystemError(what, error);
  };
  if (::fchmod(file.get(), 0600) != 0) fail(errno);  // the umask may have removed bits
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(file.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(errno);
    done += static_cast<std::size_t>(n);
  }
  // close() reports delayed write errors (NFS, quota).
  if (::close(file.release()) != 0) {
    const int error = errno;
    ::unlink(path.c_str());
    throw SystemError(what, error);
  }
}

}  // namespace davincirun::detail
