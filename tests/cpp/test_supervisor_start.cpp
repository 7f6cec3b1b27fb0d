// How a job's supervisor process starts: as a forked copy of the program
// that links it (ChildProcess::fork_call, which the `davincirun` command
// uses), or as the davincirun-supervisor program, found where it is
// installed; and which signals a child resets (signals_not_default).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include "davincirun/errors.hpp"
#include "davincirun/process.hpp"
#include "davincirun/unique_fd.hpp"
#include "job/supervisor_program.hpp"

using namespace davincirun;

namespace {

// What the copy finds, one bit per fact, written to descriptor 3.
enum Fact : std::uint32_t {
  own_session = 1U << 0,
  handler_reset = 1U << 1,
  ignored_kept = 1U << 2,
  mask_empty = 1U << 3,
  other_fd_closed = 1U << 4,
  stdin_dev_null = 1U << 5,
  named = 1U << 6,
  command_line = 1U << 7,
};
constexpr std::uint32_t all_facts = (1U << 8) - 1;

int leaked_fd = -1;  // a descriptor of the parent, not close-on-exec: the copy must not have it

void on_usr1(int /*sig*/) {}

int report_facts(int fd) {
  std::uint32_t facts = 0;
  if (::getsid(0) == ::getpid()) facts |= own_session;
  struct sigaction usr1{};
  struct sigaction usr2{};
  ::sigaction(SIGUSR1, nullptr, &usr1);
  ::sigaction(SIGUSR2, nullptr, &usr2);
  if (usr1.sa_handler == SIG_DFL) facts |= handler_reset;
  if (usr2.sa_handler == SIG_IGN) facts |= ignored_kept;
  sigset_t mask;
  ::sigprocmask(SIG_BLOCK, nullptr, &mask);
  if (sigismember(&mask, SIGTERM) == 0 && sigismember(&mask, SIGCHLD) == 0) facts |= mask_empty;
  if (::fcntl(leaked_fd, F_GETFD) < 0 && errno == EBADF) facts |= other_fd_closed;
  struct stat in{};
  struct stat null{};
  if (::fstat(STDIN_FILENO, &in) == 0 && ::stat("/dev/null", &null) == 0 && in.st_rdev == null.st_rdev) {
    facts |= stdin_dev_null;
  }
  char comm[32] = {};
  const UniqueFd f(::open("/proc/self/comm", O_RDONLY | O_CLOEXEC));
  if (f && ::read(f.get(), comm, sizeof comm - 1) > 0 && std::string(comm) == "davincirun-supe\n") facts |= named;
  // Its command line (ps -f, pgrep -f) is the name alone, not the parent's.
  char line[4096] = {};
  const UniqueFd c(::open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC));
  const ssize_t got = c ? ::read(c.get(), line, sizeof line) : -1;
  const std::string_view shown(line, got > 0 ? static_cast<std::size_t>(got) : 0);
  if (shown.substr(0, 22) == std::string_view("davincirun-supervisor\0", 22) &&
      shown.find_first_not_of('\0', 22) == std::string_view::npos) {
    facts |= command_line;
  }
  return ::write(fd, &facts, sizeof facts) == static_cast<ssize_t>(sizeof facts) ? 7 : 1;
}

int throw_something(int /*fd*/) { throw std::runtime_error("escaped"); }

}  // namespace

TEST_CASE("fork_call runs the function in a copy that starts as a new program would", "[process]") {
  int pair[2];
  REQUIRE(::pipe(pair) == 0);
  const UniqueFd read_end(pair[0]);
  UniqueFd write_end(pair[1]);
  const UniqueFd leaked(::open("/dev/null", O_RDONLY));  // no O_CLOEXEC: exec would keep it too
  leaked_fd = leaked.get();
  struct sigaction handler{};
  handler.sa_handler = on_usr1;
  struct sigaction ignore{};
  ignore.sa_handler = SIG_IGN;
  struct sigaction old_usr1{};
  struct sigaction old_usr2{};
  ::sigaction(SIGUSR1, &handler, &old_usr1);
  ::sigaction(SIGUSR2, &ignore, &old_usr2);
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigset_t old_mask;
  ::sigprocmask(SIG_BLOCK, &term, &old_mask);

  ChildProcess child = ChildProcess::fork_call(report_facts, write_end.get(), "davincirun-supervisor");

  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  ::sigaction(SIGUSR1, &old_usr1, nullptr);
  ::sigaction(SIGUSR2, &old_usr2, nullptr);
  write_end.reset();
  CHECK(child.pidfd() == -1);
  std::uint32_t facts = 0;
  REQUIRE(::read(read_end.get(), &facts, sizeof facts) == static_cast<ssize_t>(sizeof facts));
  CHECK(facts == all_facts);
  const ExitStatus status = child.reap();
  CHECK(status.kind == ExitStatus::Kind::exited);
  CHECK(status.value == 7);
}

TEST_CASE("fork_call: an exception escaping the function is exit status 2", "[process]") {
  const UniqueFd null(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  ChildProcess child = ChildProcess::fork_call(throw_something, null.get(), "davincirun-supervisor");
  const ExitStatus status = child.reap();
  CHECK(status.kind == ExitStatus::Kind::exited);
  CHECK(status.value == 2);
}

TEST_CASE("fork_call refuses a process with a second thread", "[process]") {
  std::mutex mutex;
  std::condition_variable cv;
  bool release = false;
  std::thread other([&] {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return release; });
  });
  const UniqueFd null(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  CHECK_THROWS_AS(ChildProcess::fork_call(report_facts, null.get(), "x"), std::logic_error);
  {
    const std::lock_guard<std::mutex> lock(mutex);
    release = true;
  }
  cv.notify_one();
  other.join();
}

TEST_CASE("the supervisor program: the one named, else the variable's, else beside this program", "[process]") {
  const char* saved = ::getenv("DAVINCIRUN_SUPERVISOR");
  const std::string restore = saved ? saved : "";
  ::unsetenv("DAVINCIRUN_SUPERVISOR");
  CHECK(detail::find_supervisor_program("/bin/true") == "/bin/true");
  CHECK_THROWS_WITH(detail::find_supervisor_program("/nonexistent/supervisor"),
                    "the job supervisor program '/nonexistent/supervisor' is not an executable file");
  // This test program has no davincirun-supervisor beside it.
  char self[4096] = {};
  REQUIRE(::readlink("/proc/self/exe", self, sizeof self - 1) > 0);
  std::string dir(self);
  dir.resize(dir.rfind('/'));
  CHECK_THROWS_WITH(
      detail::find_supervisor_program(""),
      Catch::StartsWith("cannot find the davincirun-supervisor program (tried " + dir + "/davincirun-supervisor") &&
          Catch::EndsWith("); set DAVINCIRUN_SUPERVISOR to its path"));
  ::setenv("DAVINCIRUN_SUPERVISOR", "/bin/true", 1);
  CHECK(detail::find_supervisor_program("") == "/bin/true");
  ::setenv("DAVINCIRUN_SUPERVISOR", "/nonexistent/supervisor", 1);
  CHECK_THROWS_WITH(detail::find_supervisor_program(""),
                    "DAVINCIRUN_SUPERVISOR='/nonexistent/supervisor' is not an executable file");
  if (saved) {
    ::setenv("DAVINCIRUN_SUPERVISOR", restore.c_str(), 1);
  } else {
    ::unsetenv("DAVINCIRUN_SUPERVISOR");
  }
}

TEST_CASE("signals_not_default names the handled and the ignored signals, the ones a child resets", "[process]") {
  struct sigaction handler{};
  handler.sa_handler = on_usr1;
  struct sigaction ignore{};
  ignore.sa_handler = SIG_IGN;
  struct sigaction old_usr1{};
  struct sigaction old_usr2{};
  ::sigaction(SIGUSR1, &handler, &old_usr1);
  ::sigaction(SIGUSR2, &ignore, &old_usr2);
  const sigset_t changed = signals_not_default();
  ::sigaction(SIGUSR1, &old_usr1, nullptr);
  ::sigaction(SIGUSR2, &old_usr2, nullptr);
  CHECK(sigismember(&changed, SIGUSR1) == 1);
  CHECK(sigismember(&changed, SIGUSR2) == 1);
  CHECK(sigismember(&changed, SIGWINCH) == 0);  // Catch2 handles SIGTERM itself
  const sigset_t after = signals_not_default();
  CHECK(sigismember(&after, SIGUSR1) == (old_usr1.sa_handler == SIG_DFL ? 0 : 1));
}
