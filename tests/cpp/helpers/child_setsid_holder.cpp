// child_setsid_holder [anything, ignored]: forks a grandchild that leaves the
// process group with setsid() and sleeps 30 s holding stdout open; once it
// has left, prints "holder <pid>" and exits 0.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

int main() {
  int ready[2];
  if (::pipe(ready) != 0) return 3;
  const pid_t pid = ::fork();
  if (pid < 0) return 4;
  if (pid == 0) {
    ::setsid();
    ssize_t ignored = ::write(ready[1], "x", 1);
    (void)ignored;
    std::this_thread::sleep_for(std::chrono::seconds(30));
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte;
  if (::read(ready[0], &byte, 1) != 1) return 5;
  std::printf("holder %d\n", static_cast<int>(pid));
  return 0;
}
