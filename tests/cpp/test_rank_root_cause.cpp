// rank_root_cause(): the error file torch's @record writes, read before the
// log; the hint where a framework's own message misleads.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "davincirun/root_cause.hpp"
#include "test_support.hpp"

using namespace davincirun;
using namespace davincirun_test;

namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// What torch 2.x's ErrorHandler.record_exception() writes (error_handler.py).
const char* const kRecorded =
    R"({"message": {"message": "ValueError: bad shard 17", "extraInfo": {"py_callstack": "Traceback (most recent )"
    R"(call last):\n  File \"/w/train.py\", line 9, in main\n    load(17)\n  File \"/w/train.py\", line 4, in load\n)"
    R"(    raise ValueError(\"bad shard 17\")\nValueError: bad shard 17\n", "timestamp": "1764806400"}}})";

}  // namespace

TEST_CASE("the error file sits beside the log", "[root_cause]") {
  CHECK(torch_error_file_for("/run/rank_3.device_5.log") == "/run/rank_3.device_5.error.json");
  CHECK(torch_error_file_for("/run/scheduler.log") == "/run/scheduler.error.json");
}

TEST_CASE("a rank's root cause comes from torch's error file when it wrote one", "[root_cause]") {
  TempDir dir;
  const std::string log = dir.path() + "/rank_1.device_1.log";
  write(log, "epoch 1\n[rank1]: some echo of the error\n");
  SECTION("torch's layout: the exception and its call stack") {
    write(torch_error_file_for(log), kRecorded);
    const RootCause cause = rank_root_cause(log);
    CHECK(cause.found);
    CHECK(cause.source == "its torch error file");
    CHECK(cause.exception == "ValueError: bad shard 17");
    CHECK(has(cause.text, "raise ValueError(\"bad shard 17\")"));
    CHECK(cause.hint.empty());
  }
  SECTION("the newer layout: a message that is a string") {
    write(torch_error_file_for(log), R"({"message": "RuntimeError: the store went away\nmore"})");
    const RootCause cause = rank_root_cause(log);
    CHECK(cause.source == "its torch error file");
    CHECK(cause.exception == "RuntimeError: the store went away");
  }
  SECTION("no file, an empty one, or one that is no such JSON: the log") {
    for (const char* text : {"", "{", "[1, 2]", R"({"other": 1})", R"({"message": {"message": 5}})"}) {
      INFO(text);
      if (*text != '\0') write(torch_error_file_for(log), text);
      const RootCause cause = rank_root_cause(log);
      CHECK(cause.source == "its log");
      CHECK(has(cause.text, "some echo of the error"));
    }
  }
}

TEST_CASE("MindSpore's 'use mpirun' gets a hint naming dynamic-cluster mode", "[root_cause]") {
  TempDir dir;
  const std::string log = dir.path() + "/rank_0.device_0.log";
  write(log,
        "Traceback (most recent call last):\n  File \"/w/net.py\", line 2, in <module>\n    init()\n"
        "RuntimeError: Maybe you are trying to call 'mindspore.communication.init()' without using 'mpirun', which "
        "will make MindSpore load several environment variables and check their validation.\n");
  const RootCause cause = rank_root_cause(log);
  CHECK(has(cause.hint, "--launch-mode dynamic-cluster"));
  write(log, "Traceback (most recent call last):\n  File \"/w/net.py\", line 2, in <module>\nValueError: x\n");
  CHECK(rank_root_cause(log).hint.empty());
}
