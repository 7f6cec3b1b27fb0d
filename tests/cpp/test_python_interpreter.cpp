// Which interpreter `davincirun train.py` (a script without execute
// permission) runs with: cli/python_script.hpp, on fake installation
// layouts whose "interpreters" are empty executable files.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <optional>
#include <string>

#include "python_script.hpp"
#include "test_support.hpp"

using davincirun::Environment;
using davincirun::cli::python_interpreter;
using namespace davincirun_test;

namespace {

// An empty file at `path` (its directories made) with `mode`.
std::string file(const std::string& path, mode_t mode = 0755) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  write_file(path, "");
  REQUIRE(::chmod(path.c_str(), mode) == 0);
  return path;
}

Environment with_path(const std::string& path) {
  Environment env;
  env.set("PATH", path);
  return env;
}

}  // namespace

TEST_CASE("a venv's davincirun uses the venv's interpreter of the wheel's version, whatever PATH holds",
          "[python_interpreter]") {
  TempDir tmp;
  const std::string self = file(tmp / "venv/bin/davincirun");
  const std::string versioned = file(tmp / "venv/bin/python3.11");
  file(tmp / "venv/bin/python3");
  file(tmp / "path/python3.11");
  const Environment env = with_path(tmp / "path");
  CHECK(python_interpreter(env, self, "python3.11") == versioned);
  // A program built by CMake alone knows no version: the directory's python3.
  CHECK(python_interpreter(env, self, "") == tmp / "venv/bin/python3");
}

TEST_CASE("without the wheel's version next to it, the directory's python3 (a CPython 3.7 venv)",
          "[python_interpreter]") {
  TempDir tmp;
  const std::string self = file(tmp / "venv/bin/davincirun");
  file(tmp / "venv/bin/python3.8");  // another version: never taken for python3.7
  const std::string python3 = file(tmp / "venv/bin/python3");
  CHECK(python_interpreter(with_path(tmp / "venv/bin"), self, "python3.7") == python3);
}

TEST_CASE("a symbolic link next to the program is returned as found, not resolved", "[python_interpreter]") {
  TempDir tmp;
  const std::string base = file(tmp / "base/bin/python3.12");
  const std::string self = file(tmp / "venv/bin/davincirun");
  std::filesystem::create_symlink(base, tmp / "venv/bin/python3.12");
  CHECK(python_interpreter(with_path(""), self, "python3.12") == tmp / "venv/bin/python3.12");
}

TEST_CASE("a --user install (~/.local/bin holds no interpreter) takes PATH's python3.X before its python3",
          "[python_interpreter]") {
  TempDir tmp;
  const std::string self = file(tmp / "home/.local/bin/davincirun");
  file(tmp / "usr/local/bin/python3");
  const std::string versioned = file(tmp / "usr/bin/python3.9");
  file(tmp / "usr/bin/python3");
  const Environment env = with_path(tmp / "home/.local/bin:" + tmp / "usr/local/bin:" + tmp / "usr/bin");
  CHECK(python_interpreter(env, self, "python3.9") == versioned);
  // The version nowhere: the first python3 in PATH.
  CHECK(python_interpreter(env, self, "python3.10") == tmp / "usr/local/bin/python3");
}

TEST_CASE("files that cannot be run are passed over, and python comes last, only from PATH", "[python_interpreter]") {
  TempDir tmp;
  const std::string self = file(tmp / "prefix/bin/davincirun");
  file(tmp / "prefix/bin/python3.11", 0644);                        // not executable
  std::filesystem::create_directories(tmp / "prefix/bin/python3");  // a directory
  file(tmp / "prefix/bin/python");                                  // never taken from here
  const std::string python = file(tmp / "path/python");
  CHECK(python_interpreter(with_path(tmp / "path"), self, "python3.11") == python);
  CHECK(python_interpreter(with_path(tmp / "empty"), self, "python3.11") == std::nullopt);
}

TEST_CASE("DAVINCIRUN_PYTHON, when set and not empty, comes first, as given", "[python_interpreter]") {
  TempDir tmp;
  const std::string self = file(tmp / "venv/bin/davincirun");
  const std::string venv_python = file(tmp / "venv/bin/python3.11");
  Environment env = with_path(tmp / "venv/bin");
  env.set("DAVINCIRUN_PYTHON", "/opt/conda/bin/python");
  CHECK(python_interpreter(env, self, "python3.11") == std::string("/opt/conda/bin/python"));
  env.set("DAVINCIRUN_PYTHON", "");
  CHECK(python_interpreter(env, self, "python3.11") == venv_python);
}

TEST_CASE("an unknown own path (no /proc) skips to PATH", "[python_interpreter]") {
  TempDir tmp;
  const std::string versioned = file(tmp / "path/python3.11");
  CHECK(python_interpreter(with_path(tmp / "path"), "", "python3.11") == versioned);
}
