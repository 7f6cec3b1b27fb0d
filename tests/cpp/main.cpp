// Catch2's main lives alone in this file so it is compiled once.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <signal.h>

#include <cstdio>
#include <cstring>

int main(int argc, char* argv[]) {
  // The supervisor tests run in every supervision mode, including the one
  // the davincirun-supervisor process uses (SupervisorOptions::
  // owns_all_children, with SIGCHLD tracking on kernels without pidfds): it
  // reads SIGCHLD from a signalfd, which only works when SIGCHLD is blocked
  // in every thread of the process, so it must be blocked here, before Catch
  // or any test starts a thread (threads inherit the mask). Blocking it
  // changes nothing else: SIGCHLD's default action is to ignore it, nothing
  // in the tests handles it, and children get an empty signal mask before
  // exec (ChildProcess resets it).
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  if (const int err = ::pthread_sigmask(SIG_BLOCK, &chld, nullptr); err != 0) {
    std::fprintf(stderr, "pthread_sigmask: %s\n", std::strerror(err));
    return 2;
  }
  return Catch::Session().run(argc, argv);
}
