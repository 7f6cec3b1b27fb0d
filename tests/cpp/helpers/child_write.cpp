// child_write BYTES [SIGNAL]: writes BYTES bytes of pattern_bytes() to stdout
// with write(2), then raises SIGNAL (without a core dump) or exits 0.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>

#include "pattern.hpp"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string data = davincirun_test::pattern_bytes(std::strtoull(argv[1], nullptr, 10));
  std::size_t done = 0;
  while (done < data.size()) {
    const std::size_t chunk = data.size() - done < 65536 ? data.size() - done : 65536;
    const ssize_t n = ::write(STDOUT_FILENO, data.data() + done, chunk);
    if (n < 0) return 3;
    done += static_cast<std::size_t>(n);
  }
  if (argc > 2) {
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::raise(std::atoi(argv[2]));
  }
  return 0;
}
