// Files the job creates (per-rank logs, the rank table copy, the summary)
// are always new files: a symbolic link, or any file, already at their path
// is refused and left as it was; the mode is 0600 whatever the umask.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "common/private_file.hpp"
#include "davincirun/console_sink.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/log_streamer.hpp"
#include "test_support.hpp"

using namespace davincirun;
using namespace davincirun_test;
using Catch::Matchers::Contains;

namespace {

constexpr time_t long_ago = 1'000'000'000;

void make_victim(const std::string& path) {
  write_file(path, "precious\n");
  const timespec times[2] = {{long_ago, 0}, {long_ago, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

void check_victim(const std::string& path) {
  CHECK(read_file(path) == "precious\n");
  struct stat st{};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK(st.st_mtim.tv_sec == long_ago);
}

// Each way of creating a job file, given its path; throws on failure.
void create_log(const std::string& path) {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  NullLineSink console;
  try {
    RankLog log(0, "rank 0", UniqueFd(fds[0]), path, console);  // owns fds[0], also on failure
  } catch (...) {
    ::close(fds[1]);
    throw;
  }
  ::close(fds[1]);
}

void create_private(const std::string& path) { detail::write_private_file(path, "{}\n", "create " + path); }

}  // namespace

TEST_CASE("job files: a planted symlink or file at their path is refused, never followed nor written", "[security]") {
  const std::function<void(const std::string&)> create =
      GENERATE(as<std::function<void(const std::string&)>>{}, create_log, create_private);
  TempDir tmp;
  const std::string victim = tmp / "victim";
  make_victim(victim);
  const std::string path = tmp / "rank_0.device_0.log";
  SECTION("a symbolic link to a file") { REQUIRE(::symlink(victim.c_str(), path.c_str()) == 0); }
  SECTION("a dangling symbolic link") { REQUIRE(::symlink((tmp / "absent").c_str(), path.c_str()) == 0); }
  SECTION("a hard link to a file") { REQUIRE(::link(victim.c_str(), path.c_str()) == 0); }
  try {
    create(path);
    FAIL_CHECK("created through what was planted");
  } catch (const SystemError& e) {
    // O_CREAT | O_EXCL: any existing name, a symbolic link included, is EEXIST.
    CHECK_THAT(e.what(), Contains(path) && Contains("File exists"));
    CHECK(e.os_errno() == EEXIST);
  }
  check_victim(victim);
  CHECK(::access((tmp / "absent").c_str(), F_OK) != 0);
}

TEST_CASE("job files: created with mode 0600 even with umask 0", "[security]") {
  const std::function<void(const std::string&)> create =
      GENERATE(as<std::function<void(const std::string&)>>{}, create_log, create_private);
  TempDir tmp;
  const std::string path = tmp / "file";
  const mode_t old = ::umask(0);
  try {
    create(path);
  } catch (...) {
    ::umask(old);
    throw;
  }
  ::umask(old);
  struct stat st{};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK((st.st_mode & 07777) == 0600);
}
