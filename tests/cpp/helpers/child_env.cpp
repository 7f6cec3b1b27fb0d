// child_env: writes each entry of its environment followed by a NUL byte
// (values may hold newlines), then exits 0.
#include <unistd.h>

#include <cstring>

extern char** environ;

int main() {
  for (char** p = environ; *p; ++p) {
    if (::write(STDOUT_FILENO, *p, std::strlen(*p) + 1) < 0) return 3;
  }
  return 0;
}
