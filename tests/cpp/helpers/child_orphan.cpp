// child_orphan DELAY_MS [anything, ignored]: forks a grandchild that leaves
// the process group with setsid(), closes its stdout and stderr, sleeps
// DELAY_MS milliseconds and exits 0. Once the grandchild has left the group,
// prints "orphan <pid>" and exits 0, so the grandchild is orphaned and
// re-parented (to the nearest child subreaper, else init) while it sleeps.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const int delay_ms = std::atoi(argv[1]);
  int ready[2];
  if (::pipe(ready) != 0) return 3;
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid < 0) return 4;
  if (pid == 0) {
    ::setsid();
    ::close(STDOUT_FILENO);
    ::close(STDERR_FILENO);
    ssize_t ignored = ::write(ready[1], "x", 1);
    (void)ignored;
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte;
  if (::read(ready[0], &byte, 1) != 1) return 5;
  std::printf("orphan %d\n", static_cast<int>(pid));
  return 0;
}
