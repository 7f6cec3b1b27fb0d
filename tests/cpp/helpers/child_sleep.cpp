// child_sleep SECONDS [ignore-term] [grandchild] [anything else, ignored]
// Optionally ignores SIGTERM; optionally forks a grandchild that stays in the
// process group and sleeps 60 s (printing "grandchild <pid>"); then prints
// "ready", sleeps SECONDS (a decimal) and exits 0. Extra arguments are
// ignored, so tests can tag processes to find them in /proc.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  bool ignore_term = false, grandchild = false;
  for (int i = 2; i < argc; ++i) {
    ignore_term = ignore_term || std::strcmp(argv[i], "ignore-term") == 0;
    grandchild = grandchild || std::strcmp(argv[i], "grandchild") == 0;
  }
  if (ignore_term) ::signal(SIGTERM, SIG_IGN);
  if (grandchild) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      std::this_thread::sleep_for(std::chrono::seconds(60));
      ::_exit(0);
    }
    std::printf("grandchild %d\n", static_cast<int>(pid));
  }
  std::printf("ready\n");
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(argv[1])));
  return 0;
}
