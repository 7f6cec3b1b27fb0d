// A command in PATH: where find_executable() finds it, and, when it is not
// there, the message naming the first directories searched and the
// commands of a similar name found there.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cerrno>
#include <optional>
#include <string>
#include <vector>

#include "davincirun/process.hpp"
#include "process/command_lookup.hpp"
#include "test_support.hpp"

using namespace davincirun;
using namespace davincirun::detail;
using namespace davincirun_test;
using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;

namespace {

void program(const std::string& path, mode_t mode = 0755) {
  write_file(path, "#!/bin/sh\n");
  REQUIRE(::chmod(path.c_str(), mode) == 0);
}

}  // namespace

TEST_CASE("find_executable takes the first executable regular file in PATH, like execvp", "[command_lookup]") {
  TempDir first, second;
  ::mkdir((first / "tool").c_str(), 0755);  // a directory: skipped
  program(first / "script", 0644);          // not executable: skipped, but remembered
  program(second / "tool");
  program(second / "script");
  const std::string path = "/nonexistent-dir:" + first.path() + ":" + second.path();
  int error = -1;
  CHECK(find_executable("tool", path, error) == second / "tool");
  CHECK(error == 0);
  CHECK(find_executable("script", path, error) == second / "script");
  CHECK(find_executable("script", first.path(), error) == std::nullopt);
  CHECK(error == EACCES);
  CHECK(find_executable("no-such-tool", path, error) == std::nullopt);
  CHECK(error == ENOENT);
  CHECK(find_executable("", path, error) == std::nullopt);
  CHECK(error == ENOENT);
  CHECK(find_executable("sub/tool", path, error) == "sub/tool");  // with a '/': as it is
  CHECK(is_executable_file(second / "tool"));
  CHECK_FALSE(is_executable_file(first / "script"));
  CHECK_FALSE(is_executable_file(first / "tool"));
  CHECK_FALSE(is_executable_file(first / "missing"));
  CHECK(path_directories("/a::/b:") == std::vector<std::string>{"/a", ".", "/b", "."});
}

TEST_CASE("edit_distance counts a swap of neighbours as one edit, and stops past the limit", "[command_lookup]") {
  CHECK(edit_distance("python", "python", 2) == 0);
  CHECK(edit_distance("pyhton", "python", 2) == 1);  // swapped
  CHECK(edit_distance("python", "python3", 2) == 1);
  CHECK(edit_distance("pthon", "python", 2) == 1);
  CHECK(edit_distance("pyhton", "python3", 2) == 2);
  CHECK(edit_distance("", "ab", 2) == 2);
  CHECK(edit_distance("abc", "xyz", 2) == 3);     // limit + 1
  CHECK(edit_distance("a", "abcdefgh", 2) == 3);  // too different in length to compare
  CHECK(edit_distance("kitten", "sitting", 5) == 3);
}

TEST_CASE("similar_commands finds executables near the name, nearest first, then in PATH order", "[command_lookup]") {
  TempDir first, second;
  program(first / "python3");
  program(first / "python2", 0644);  // not executable: never suggested
  program(second / "python3");       // found again later in PATH: once
  program(second / "pythn");
  program(second / "pythonista");              // 4 edits away
  ::mkdir((second / "pythom").c_str(), 0755);  // a directory, not a command
  const std::string path = first.path() + ":" + second.path() + ":/nonexistent-dir";
  CHECK(similar_commands("python", path) == std::vector<std::string>{"python3", "pythn"});
  CHECK(similar_commands("pyhton", path) == std::vector<std::string>{"python3", "pythn"});  // both 2 away
  CHECK(similar_commands("python", path, 1) == std::vector<std::string>{"python3"});
  CHECK(similar_commands("gcc", path).empty());
  CHECK(similar_commands("sub/python", path).empty());
}

TEST_CASE("abbreviated_path names the first directories of a long PATH and counts the others", "[command_lookup]") {
  CHECK(abbreviated_path("/a:/b:/c:/d") == "/a, /b, /c, /d");
  CHECK(abbreviated_path("/a:/b:/c:/d:/e:/f") == "/a, /b, /c and 3 more directories");
  CHECK(abbreviated_path("/a::/b") == "/a, ., /b");  // an empty entry is the current directory
  CHECK(path_directory_count("/a:/b:/c:/d:/e:/f") == 6);
}

TEST_CASE("the message of a command not found is short and suggests what exists", "[command_lookup]") {
  TempDir dir;
  program(dir / "python");
  const std::string path = dir.path() + ":/d1:/d2:/d3:/d4:/d5";
  const std::string message = command_lookup_message(0, "pyhton", path, ENOENT);
  CHECK_THAT(message, Contains("rank 0: cannot run 'pyhton': command not found in PATH (" + dir.path() +
                               ", /d1, /d2 and 3 more directories)"));
  CHECK_THAT(message, EndsWith("; did you mean 'python'?"));
  CHECK_THAT(command_lookup_message(2, "nothing-like-it", path, ENOENT), EndsWith("3 more directories)"));
  CHECK_THAT(command_lookup_message(1, "python", dir.path(), EACCES),
             Contains("rank 1: cannot run 'python': found in PATH but not executable (" + dir.path() + ")"));
}
