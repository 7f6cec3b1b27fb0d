// Device locks (davincirun/device_lock.hpp), against real processes: POSIX
// locks never conflict within one process, so the other holder is always a
// child_lock_holder helper (or a forked child with another uid). A busy set
// names its holder and leaves nothing locked; disjoint sets coexist; locks
// go with their DeviceLocks and with a SIGKILLed holder; nothing in the lock
// directory is followed, or written when it is another user's.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

#include "davincirun/device_lock.hpp"
#include "davincirun/environment.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/process.hpp"
#include "test_support.hpp"

using namespace davincirun;
using namespace davincirun_test;
using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;

namespace {

const DeviceLockHolder test_holder{"test-job", {"davincirun_tests"}};

// The first line `fd` delivers within `timeout`, without its newline.
std::string read_line(int fd, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string line;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return line + "<timeout>";
    char c;
    if (::read(fd, &c, 1) != 1 || c == '\n') return line;
    line += c;
  }
}

// A child_lock_holder process and what it said: "locked", "busy <pid>" or "error ...".
class LockHolder {
 public:
  LockHolder(const std::string& dir, const std::string& devices, const std::string& job = "job-a",
             const std::vector<std::string>& command = {"python", "train.py"}) {
    ProcessSpec spec;
    spec.argv = {helper("child_lock_holder"), dir, job, devices};
    spec.argv.insert(spec.argv.end(), command.begin(), command.end());
    spec.env = Environment::current().entries();
    spec.use_pidfd = false;
    child_.emplace(ChildProcess::spawn(spec, 0));
    line_ = read_line(child_->output_fd(), 10s);
  }
  pid_t pid() const { return child_->pid(); }
  const std::string& line() const { return line_; }
  /// SIGKILL, then reap: the kernel has released its locks when this returns.
  void kill() {
    ::kill(child_->pid(), SIGKILL);
    child_->reap();
  }

 private:
  std::optional<ChildProcess> child_;  // killed and reaped on destruction
  std::string line_;
};

// Runs `body` in a forked child with uid and gid 65534 (nobody); returns its exit code.
int as_nobody(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
        ::setresuid(65534, 65534, 65534) != 0) {
      ::_exit(90);
    }
    int code = 91;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "as nobody: %s\n", e.what());
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct stat stat_of(const std::string& path) {
  struct stat st{};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st;
}

// What DeviceLocks threw, as DeviceBusyError; fails the test if it did not.
std::optional<DeviceBusyError> busy_error(const std::string& dir, const std::vector<int>& devices) {
  try {
    DeviceLocks locks(dir, devices, test_holder);
    FAIL_CHECK("devices locked although busy");
  } catch (const DeviceBusyError& e) {
    return e;
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("device locks: a set overlapping another process's is refused, naming the holder, nothing stays locked",
          "[device_lock]") {
  TempDir tmp;
  const std::string dir = tmp / "locks";
  LockHolder a(dir, "0,1", "job-a", {"python", "train.py", "--note", "it's 2 words"});
  REQUIRE(a.line() == "locked");
  // The holder describes itself in its lock files: one line, command shell-quoted.
  const std::string line = read_file(dir + "/device1.lock");
  CHECK_THAT(line, StartsWith("pid=" + std::to_string(a.pid()) + " started=20"));
  CHECK_THAT(line, EndsWith("Z job=job-a command=python train.py --note 'it'\\''s 2 words'\n"));

  const auto e = busy_error(dir, {3, 1, 2, 1});
  REQUIRE(e);
  CHECK(e->devices() == std::vector<int>{1});
  CHECK(e->holder_pid() == a.pid());
  CHECK_THAT(e->holder_description(), StartsWith("job job-a, started 20"));
  CHECK_THAT(e->holder_description(), EndsWith("Z: python train.py --note 'it'\\''s 2 words'"));
  CHECK_THAT(e->what(), StartsWith("device 1 is in use by another job: pid " + std::to_string(a.pid()) +
                                   " (job job-a, started 20"));
  // All or nothing: 2 and 3, free, were released with the refusal.
  LockHolder b(dir, "2,3", "job-b");
  CHECK(b.line() == "locked");

  SECTION("several holders: every busy device is named, by holder") {
    const auto both = busy_error(dir, {0, 1, 2, 3, 4});
    REQUIRE(both);
    CHECK(both->devices() == std::vector<int>{0, 1, 2, 3});
    CHECK(both->holder_pid() == a.pid());
    CHECK_THAT(both->what(), StartsWith("devices 0, 1 are in use by another job: pid " + std::to_string(a.pid())));
    CHECK_THAT(both->what(), Contains("; devices 2, 3 are in use by another job: pid " + std::to_string(b.pid()) +
                                      " (job job-b, started "));
    CHECK(LockHolder(dir, "4").line() == "locked");
  }
}

TEST_CASE("device locks: disjoint sets coexist", "[device_lock]") {
  TempDir tmp;
  const std::string dir = tmp / "locks";
  LockHolder a(dir, "0,1");
  REQUIRE(a.line() == "locked");
  DeviceLocks mine(dir, {3, 2, 2}, test_holder);
  CHECK(mine.devices() == std::vector<int>{2, 3});
  CHECK(LockHolder(dir, "4,5").line() == "locked");
}

TEST_CASE("device locks: held until the DeviceLocks is destroyed, moves included", "[device_lock]") {
  TempDir tmp;
  const std::string dir = tmp / "locks";
  const std::string busy_by_us = "busy " + std::to_string(::getpid());
  {
    std::optional<DeviceLocks> moved;
    {
      DeviceLocks mine(dir, {5}, test_holder);
      CHECK(LockHolder(dir, "5").line() == busy_by_us);
      moved.emplace(std::move(mine));
    }
    CHECK(LockHolder(dir, "5").line() == busy_by_us);
    CHECK(moved->devices() == std::vector<int>{5});
  }
  CHECK(LockHolder(dir, "5").line() == "locked");
}

TEST_CASE("device locks: a SIGKILLed holder's locks are released by the kernel at once", "[device_lock]") {
  TempDir tmp;
  const std::string dir = tmp / "locks";
  LockHolder a(dir, "0,1");
  REQUIRE(a.line() == "locked");
  REQUIRE(busy_error(dir, {0}));
  a.kill();
  DeviceLocks mine(dir, {0, 1}, test_holder);
  // Its stale description was replaced by ours.
  CHECK_THAT(read_file(dir + "/device0.lock"), StartsWith("pid=" + std::to_string(::getpid()) + " "));
}

TEST_CASE("device locks: this process cannot lock a device twice", "[device_lock]") {
  // A second POSIX lock would succeed silently, and closing its descriptor
  // would drop the first one.
  TempDir tmp;
  const std::string dir = tmp / "locks";
  DeviceLocks first(dir, {0}, test_holder);
  const auto e = busy_error(dir, {1, 0});
  REQUIRE(e);
  CHECK(e->devices() == std::vector<int>{0});
  CHECK(e->holder_pid() == ::getpid());
  CHECK_THAT(e->what(), Contains("device 0 is already locked by this process"));
  CHECK(LockHolder(dir, "0").line() == "busy " + std::to_string(::getpid()));  // still held
  CHECK(LockHolder(dir, "1").line() == "locked");                              // not taken by the refusal
  DeviceLocks other(dir, {1}, test_holder);
}

TEST_CASE("device locks: the directory is made sticky and shared, lock files 0666, whatever the umask",
          "[device_lock]") {
  TempDir tmp;
  const std::string dir = tmp / "locks";
  const mode_t old_umask = ::umask(077);
  std::optional<DeviceLocks> locks;
  try {
    locks.emplace(dir, std::vector<int>{7}, test_holder);
  } catch (...) {
    ::umask(old_umask);
    throw;
  }
  ::umask(old_umask);
  CHECK((stat_of(dir).st_mode & 07777) == 01777);
  CHECK((stat_of(dir + "/device7.lock").st_mode & 07777) == 0666);
  CHECK_THAT(read_file(dir + "/device7.lock"), StartsWith("pid=" + std::to_string(::getpid()) + " started=") &&
                                                   EndsWith(" job=test-job command=davincirun_tests\n"));
}

TEST_CASE("device locks: a symbolic link as lock file is refused, its target untouched", "[device_lock]") {
  TempDir tmp;
  const std::string dir = tmp / "locks";
  REQUIRE(::mkdir(dir.c_str(), 01777) == 0);
  const std::string target = tmp / "precious";
  write_file(target, "precious data\n");
  const timespec long_ago[2] = {{1'000'000'000, 0}, {1'000'000'000, 0}};
  REQUIRE(::utimensat(AT_FDCWD, target.c_str(), long_ago, 0) == 0);
  REQUIRE(::symlink(target.c_str(), (dir + "/device1.lock").c_str()) == 0);
  REQUIRE(::symlink((tmp / "absent").c_str(), (dir + "/device2.lock").c_str()) == 0);

  for (int device : {1, 2}) {
    INFO("device " << device);
    try {
      DeviceLocks locks(dir, {0, device}, test_holder);
      FAIL_CHECK("a symbolic link was used");
    } catch (const DeviceBusyError& e) {
      FAIL_CHECK(e.what());
    } catch (const ConfigError& e) {
      CHECK_THAT(e.what(), Contains(dir + "/device" + std::to_string(device) + ".lock' is a symbolic link"));
    }
  }
  CHECK(read_file(target) == "precious data\n");
  CHECK(stat_of(target).st_mtim.tv_sec == 1'000'000'000);
  CHECK(::access((tmp / "absent").c_str(), F_OK) != 0);
  CHECK(LockHolder(dir, "0").line() == "locked");  // released with the refusal
}

TEST_CASE("device locks: an unusable lock directory is refused, naming it and why", "[device_lock]") {
  TempDir tmp;
  const std::string real = tmp / "real";
  REQUIRE(::mkdir(real.c_str(), 01777) == 0);
  std::string dir;
  std::string why;
  SECTION("a symbolic link, even to a good directory") {
    dir = tmp / "link";
    REQUIRE(::symlink(real.c_str(), dir.c_str()) == 0);
    why = "is a symbolic link";
  }
  SECTION("a regular file") {
    dir = tmp / "file";
    write_file(dir, "x");
    why = "is not a directory";
  }
  SECTION("world-writable without the sticky bit") {
    dir = tmp / "open";
    REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
    REQUIRE(::chmod(dir.c_str(), 0777) == 0);
    why = "is world-writable without the sticky bit (mode 0777)";
  }
  SECTION("a missing parent") {
    dir = tmp / "missing/locks";
    why = "No such file or directory";
  }
  try {
    DeviceLocks locks(dir, {0}, test_holder);
    FAIL_CHECK("used");
  } catch (const ConfigError& e) {
    CHECK_THAT(e.what(), Contains("'" + dir + "'") && Contains(why));
  }
  CHECK(::access((real + "/device0.lock").c_str(), F_OK) != 0);
  CHECK(::access((dir + "/device0.lock").c_str(), F_OK) != 0);
}

TEST_CASE("device locks: a FIFO, a directory or a hard-linked file as lock file is refused", "[device_lock]") {
  TempDir tmp;
  const std::string dir = tmp / "locks";
  REQUIRE(::mkdir(dir.c_str(), 01777) == 0);
  std::string why;
  SECTION("a FIFO (opening it must not hang)") {
    REQUIRE(::mkfifo((dir + "/device0.lock").c_str(), 0666) == 0);
    why = "device0.lock' is not a regular file";
  }
  SECTION("a directory") {
    REQUIRE(::mkdir((dir + "/device0.lock").c_str(), 0755) == 0);
    why = "Is a directory";
  }
  SECTION("a hard link to another file") {
    write_file(tmp / "other", "other data\n");
    REQUIRE(::link((tmp / "other").c_str(), (dir + "/device0.lock").c_str()) == 0);
    why = "device0.lock' has 2 hard links";
  }
  try {
    DeviceLocks locks(dir, {0}, test_holder);
    FAIL_CHECK("used");
  } catch (const ConfigError& e) {
    CHECK_THAT(e.what(), Contains(why));
  }
  if (::access((tmp / "other").c_str(), F_OK) == 0) CHECK(read_file(tmp / "other") == "other data\n");
}

TEST_CASE(
    "device locks: another user's lock file is locked but never written nor truncated, one that is not "
    "writable is refused unless busy",
    "[device_lock]") {
  if (::geteuid() != 0) {
    WARN("needs root (chown to another user, and a child with another uid): skipped");
    return;
  }
  TempDir tmp;
  REQUIRE(::chmod(tmp.path().c_str(), 0755) == 0);  // nobody must reach the lock directory
  const std::string dir = tmp / "locks";
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  REQUIRE(::chmod(dir.c_str(), 01777) == 0);
  const std::string theirs = dir + "/device0.lock";
  const std::string content = "pid=1 started=2000-01-01T00:00:00Z job=theirs command=a much longer command line\n";
  write_file(theirs, content);
  REQUIRE(::chown(theirs.c_str(), 65534, 65534) == 0);

  SECTION("root locks it without a trace") {
    {
      DeviceLocks locks(dir, {0}, test_holder);
      CHECK(read_file(theirs) == content);
    }
    CHECK(read_file(theirs) == content);
  }
  SECTION("its holder, who did not write it, is named by its command line") {
    LockHolder a(dir, "0");
    REQUIRE(a.line() == "locked");
    CHECK(read_file(theirs) == content);
    const auto e = busy_error(dir, {0});
    REQUIRE(e);
    CHECK(e->holder_pid() == a.pid());
    CHECK_THAT(e->holder_description(), Contains("child_lock_holder " + dir + " job-a 0 python train.py"));
    CHECK_THAT(e->holder_description(), !Contains("theirs"));
  }
  SECTION("files created by a job lock for every user") {
    CHECK(as_nobody([&] {
            DeviceLocks locks(dir, {1}, test_holder);
            return 0;
          }) == 0);
    CHECK(stat_of(dir + "/device1.lock").st_uid == 65534);
    {
      DeviceLocks locks(dir, {1, 3}, test_holder);  // nobody's file, and a new one of root's
    }
    // Forked only once this process holds nothing: a child would inherit
    // the record of its locks, though not the locks.
    CHECK(as_nobody([&] {
            DeviceLocks locks(dir, {3}, test_holder);
            return 0;
          }) == 0);
  }
  SECTION("a file another user cannot write: refused, or busy when held") {
    const std::string mine = dir + "/device2.lock";
    write_file(mine, "root's\n");
    REQUIRE(::chmod(mine.c_str(), 0644) == 0);
    const auto attempt = [&] {
      try {
        DeviceLocks locks(dir, {2}, test_holder);
        return 0;
      } catch (const DeviceBusyError&) {
        return 3;
      } catch (const ConfigError& e) {
        const std::string what = e.what();
        return what.find("'" + mine + "' belongs to uid 0 and is not writable by this user (mode 0644)") !=
                       std::string::npos
                   ? 4
                   : 5;
      }
    };
    CHECK(as_nobody(attempt) == 4);
    LockHolder a(dir, "2");
    REQUIRE(a.line() == "locked");
    CHECK(as_nobody(attempt) == 3);
    CHECK(read_file(mine).rfind("pid=" + std::to_string(a.pid()) + " ", 0) == 0);
  }
}

TEST_CASE("device locks: a hard link to another user's file is refused by either user, the file untouched",
          "[device_lock]") {
  if (::geteuid() != 0) {
    WARN("needs root (files of another user, and a child with another uid): skipped");
    return;
  }
  TempDir tmp;
  REQUIRE(::chmod(tmp.path().c_str(), 0755) == 0);  // nobody must reach the lock directory
  const std::string dir = tmp / "locks";
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  REQUIRE(::chmod(dir.c_str(), 01777) == 0);
  const std::string victim = tmp / "victim";
  write_file(victim, "precious\n");
  const timespec long_ago[2] = {{1'000'000'000, 0}, {1'000'000'000, 0}};
  const std::string lock_file = dir + "/device0.lock";
  const auto refused = [&] {
    try {
      DeviceLocks locks(dir, {0}, test_holder);
      return 0;
    } catch (const ConfigError& e) {
      return std::string(e.what()).find("'" + lock_file + "' has 2 hard links") != std::string::npos ? 4 : 5;
    }
  };
  SECTION("root's file, tried by nobody") {
    REQUIRE(::chmod(victim.c_str(), 0644) == 0);
    REQUIRE(::link(victim.c_str(), lock_file.c_str()) == 0);
    REQUIRE(::utimensat(AT_FDCWD, victim.c_str(), long_ago, 0) == 0);
    CHECK(as_nobody(refused) == 4);
  }
  SECTION("nobody's file, writable by all, tried by root") {
    REQUIRE(::chown(victim.c_str(), 65534, 65534) == 0);
    REQUIRE(::chmod(victim.c_str(), 0666) == 0);
    REQUIRE(::link(victim.c_str(), lock_file.c_str()) == 0);
    REQUIRE(::utimensat(AT_FDCWD, victim.c_str(), long_ago, 0) == 0);
    CHECK(refused() == 4);
  }
  CHECK(read_file(victim) == "precious\n");
  CHECK(stat_of(victim).st_mtim.tv_sec == 1'000'000'000);
}

TEST_CASE("check_devices_free: names the holders like DeviceLocks, creates and locks nothing", "[device_lock]") {
  TempDir tmp;
  const std::string dir = tmp / "locks";
  CHECK_NOTHROW(check_devices_free(dir, {0, 1}));  // no directory yet: free
  CHECK(::access(dir.c_str(), F_OK) != 0);
  LockHolder a(dir, "1,2");
  REQUIRE(a.line() == "locked");
  CHECK_NOTHROW(check_devices_free(dir, {0, 3}));
  CHECK(::access((dir + "/device0.lock").c_str(), F_OK) != 0);
  try {
    check_devices_free(dir, {3, 2, 1});
    FAIL("devices 1 and 2 are held");
  } catch (const DeviceBusyError& e) {
    CHECK(e.devices() == std::vector<int>{1, 2});
    CHECK(e.holder_pid() == a.pid());
    CHECK_THAT(e.what(), StartsWith("devices 1, 2 are in use by another job: pid " + std::to_string(a.pid())));
  }
  // Checking took no lock: a job can still lock the free devices.
  CHECK(LockHolder(dir, "0,3").line() == "locked");
  SECTION("a symbolic link is refused, never followed") {
    write_file(tmp / "victim", "x");
    REQUIRE(::symlink((tmp / "victim").c_str(), (dir + "/device5.lock").c_str()) == 0);
    CHECK_THROWS_WITH(check_devices_free(dir, {5}), Contains("is a symbolic link"));
  }
}
