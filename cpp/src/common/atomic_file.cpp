#include "common/atomic_file.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "davincirun/errors.hpp"
#include "davincirun/unique_fd.hpp"

namespace davincirun::detail {

void write_file_atomically(const std::string& path, const std::string& text, mode_t mode, const std::string& what,
                           Durability durability) {
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty()) throw SystemError(what, EISDIR);  // "dir/": no file name
  // In the same directory, so that rename() cannot cross file systems.
  std::string temporary = dir + "." + name + ".XXXXXX";
  UniqueFd file(::mkostemp(temporary.data(), O_CLOEXEC));
  if (!file) throw SystemError(what, errno);
  const auto fail = [&](int error) {
    file.reset();
    ::unlink(temporary.c_str());  // ours: made above
    throw SystemError(what, error);
  };
  if (::fchmod(file.get(), mode) != 0) fail(errno);  // mkostemp makes 0600
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(file.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(errno);
    done += static_cast<std::size_t>(n);
  }
  // On disk before it takes the name: a crash leaves the old file, not an empty one.
  if (durability == Durability::flushed && ::fsync(file.get()) != 0) fail(errno);
  if (::close(file.release()) != 0) fail(errno);  // delayed write errors (NFS, quota)
  if (::rename(temporary.c_str(), path.c_str()) != 0) fail(errno);
}

}  // namespace davincirun::detail
