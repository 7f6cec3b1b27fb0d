// find_root_cause(), read_root_cause(): the lines of a failed rank's log that
// say why, on the layouts recorded in tests/data/failure_logs/ (README.md
// there says where each comes from).
#include <catch2/catch.hpp>

#include <string>

#include "davincirun/display_width.hpp"
#include "davincirun/failure_report.hpp"
#include "davincirun/root_cause.hpp"
#include "test_support.hpp"

using namespace davincirun;
using namespace davincirun_test;

namespace {

std::string layout(const std::string& name) { return std::string(DAVINCIRUN_TEST_DATA) + "/failure_logs/" + name; }

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

bool ends_with(const std::string& text, const std::string& end) {
  return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

std::size_t count_lines(const std::string& text) {
  std::size_t n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

// Within the bounds root_cause.hpp states.
void check_bounds(const RootCause& c) {
  std::size_t lines = 0;
  std::size_t start = 0;
  while (start < c.text.size()) {
    const std::size_t nl = c.text.find('\n', start);
    REQUIRE(nl != std::string::npos);  // every line ends in '\n'
    const std::string line = c.text.substr(start, nl - start);
    CHECK(line.size() <= RootCauseLimits::line_bytes + 3);  // + "…"
    if (line != "...") ++lines;
    start = nl + 1;
  }
  CHECK(lines <= RootCauseLimits::lines);
  CHECK(drawable_text(c.text + "x").size() == c.text.size() - count_lines(c.text) + 1);  // only '\n' is control
}

}  // namespace

TEST_CASE("root cause of a plain Python traceback: head, first and last frames, exception, tail", "[root_cause]") {
  const RootCause c = read_root_cause(layout("python_traceback.log"));
  check_bounds(c);
  CHECK(c.found);
  CHECK(c.exception ==
        "json.decoder.JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 12 (char 11)");
  CHECK(c.error_code.empty());
  // The head, the caller's frame, "...", the raising frame and the exception (the tail is within).
  CHECK(has(c.text,
            "Traceback (most recent call last):\n"
            "  File \"/tmp/train/train.py\", line 15, in <module>\n"
            "    main()\n"
            "...\n"));
  CHECK(has(c.text,
            "  File \"/root/.pyenv/versions/3.11.7/lib/python3.11/json/decoder.py\", line 353, in raw_decode\n"
            "    obj, end = self.scan_once(s, idx)\n"));
  CHECK(c.text.substr(c.text.size() - c.exception.size() - 1) == c.exception + "\n");
  CHECK(!has(c.text, "epoch 0 step 0"));
}

TEST_CASE("root cause of a chained exception: the final exception and the original one", "[root_cause]") {
  const RootCause c = read_root_cause(layout("python_chained.log"));
  check_bounds(c);
  CHECK(c.exception == "RuntimeError: step 2: no batch to train on");
  CHECK(has(c.text,
            "IndexError: list index out of range\n"
            "The above exception was the direct cause of the following exception:\n"
            "Traceback (most recent call last):\n"));
  CHECK(has(c.text, "RuntimeError: step 2: no batch to train on\n"));
}

TEST_CASE("root cause of a MindSpore Ascend error: exception, error sections and codes, no C++ call stack",
          "[root_cause]") {
  const RootCause c = read_root_cause(layout("mindspore_ascend_hccl.log"));
  check_bounds(c);
  CHECK(c.found);
  CHECK(c.exception == "RuntimeError: Preprocess failed before run graph 1.");
  CHECK(c.error_code.substr(0, 36) == "EI0006: Getting socket timed out. Re");
  CHECK(has(c.text, "RuntimeError: Preprocess failed before run graph 1.\n- Ascend Error Message:\nEI0006: "));
  CHECK(has(c.text, "        Solution: 1. Look for errors"));
  CHECK(has(c.text, "        Failed to build the communication domain, ret 7"));
  CHECK(has(c.text, "- Framework Error Message:\nInit hccl communicator for group hccl_world_group failed, ret: 7\n"));
  CHECK(!has(c.text, "C++ Call Stack"));
  CHECK(!has(c.text, "file_10.cc"));  // the frames in the middle of the call stack
  CHECK(!has(c.text, "-------"));
  // The last lines, after the call stack.
  CHECK(has(c.text, "...\nmindspore/ccsrc/runtime/hardware/device_context/file_46.cc:1802 ExecuteGraph\n"));
  CHECK(ends_with(c.text, "[mindspore/dataset/engine/datasets.py:4089] Dataset is stopped.\n"));
  CHECK(count_lines(c.text) < 40);
}

TEST_CASE("root cause of CANN error codes without a traceback: each code once, with its message", "[root_cause]") {
  const RootCause c = read_root_cause(layout("cann_codes_no_traceback.log"));
  check_bounds(c);
  CHECK(c.found);
  CHECK(c.exception.empty());
  CHECK(c.error_code.substr(0, 50) == "EJ0001: 2024-06-12-10:30:12.481.223 Failed to init");
  CHECK(has(c.text, "EJ0001: 2024-06-12-10:30:12.481.223 Failed to initialize the HCCP process."));
  CHECK(has(c.text,
            "        Solution: Wait 10 s after stopping the earlier process, then try again.\n"
            "        TraceBack (most recent call last):\n"
            "        tsd client wait response fail"));
  CHECK(!has(c.text, "Open tsd failed"));  // a fourth message line
  CHECK(has(c.text, "EE1001: 2024-06-12-10:30:12.482.004 The argument is invalid."));
  // A repeated code is shown at its first place, with its message.
  CHECK(has(c.text,
            "EE1001: 2024-06-12-10:30:12.482.004 The argument is invalid. Reason: rtGetDevMsg execute failed, "
            "reason=[driver error:internal error]\n        Solution: 1. Check the input parameter range"));
  CHECK(has(c.text, "[ERROR] aclrtSetDevice(3) failed, errorCode = 507033\n[INFO] end of program\n"));
}

TEST_CASE("root cause of a torch.distributed gloo error: the exception without c10's C++ frames", "[root_cause]") {
  const RootCause c = read_root_cause(layout("torch_gloo.log"), 2);
  check_bounds(c);
  CHECK(c.exception ==
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
        "[10.1.2.4]:31337");
  CHECK(has(c.text, c.exception + "\n...\nframe #3:"));
  CHECK(!has(c.text, "frame #1:"));
}

TEST_CASE("root cause under torchrun: the worker's exception, ChildFailedError and its root-cause section",
          "[root_cause]") {
  const RootCause c = read_root_cause(layout("torchrun_child_failed.log"));
  check_bounds(c);
  CHECK(c.exception == "RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x10 and 16x4)");
  CHECK(has(c.text,
            "[default1]:RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x10 and 16x4)\n...\n"
            "Traceback (most recent call last):\n"));
  CHECK(!has(c.text, "closing signal SIGTERM"));
  CHECK(has(c.text,
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
            "============================================================\n"
            "train.py FAILED\n...\n"));
  CHECK(has(c.text, "Root Cause (first observed failure):\n[0]:\n"));
  CHECK(has(c.text, "  rank      : 1 (local_rank: 1)\n  exitcode  : 1 (pid: 4122)\n"));
}

TEST_CASE("root cause with progress bars, invalid UTF-8, a huge line and no final newline", "[root_cause]") {
  const RootCause c = read_root_cause(layout("progress_invalid_utf8.log"), 50);
  check_bounds(c);
  CHECK(c.found);
  // The '\r' before "Traceback" ends a progress bar: the line shows the traceback.
  CHECK(has(c.text, "Traceback (most recent call last):\n  File \"/data/train.py\", line 40, in <module>\n"));
  CHECK(c.exception == "ValueError: loss is nan for sample \xEF\xBF\xBD\xEF\xBF\xBD( caf\xC3\xA9");
  CHECK(has(c.text, "Epoch 1: 100%|"));  // each bar in its last state
  CHECK(!has(c.text, "Epoch 1:  10%"));
  CHECK(has(c.text, "sample label: \xEF\xBF\xBD\xEF\xBF\xBD caf\xEF\xBF\xBD red\n"));  // no escape sequences
  CHECK(has(c.text, std::string(RootCauseLimits::line_bytes, 'x') + "\xE2\x80\xA6\n"));
}

TEST_CASE("root cause of an empty log, a missing file, a log without an error", "[root_cause]") {
  CHECK(read_root_cause(layout("empty.log")).text.empty());
  CHECK(!read_root_cause(layout("empty.log")).found);
  CHECK(read_root_cause(layout("no-such.log")).text.empty());
  const RootCause c = find_root_cause("step 1\nstep 2\n\n\n", 1);
  CHECK(!c.found);
  CHECK(c.text == "step 2\n");  // trailing blank lines are not the last lines
  CHECK(find_root_cause("\n\n").text.empty());
  CHECK(find_root_cause("Traceback (most recent call last):").exception.empty());  // cut off
}

TEST_CASE("root cause of a 5 MiB log whose traceback is in its last KiB, read from its end", "[root_cause]") {
  TempDir dir;
  std::string log;
  log.reserve(std::size_t{5} * 1024 * 1024 + 2048);
  for (int i = 0; log.size() < std::size_t{5} * 1024 * 1024; ++i) {
    log += "Traceback (most recent call last): a line that is not one " + std::to_string(i) + "\n";
  }
  log += "epoch 9 step 99\r\n";
  log += read_file(layout("mindspore_matmul_shape.log"));
  write_file(dir / "big.log", log);
  const RootCause c = read_root_cause(dir / "big.log");
  check_bounds(c);
  CHECK(c.exception == "RuntimeError: For 'MatMulExt' op, shape1[-1] must be equal to shape2[-2], but got 3 and 4.");
  CHECK(!has(c.text, "not one"));
}

TEST_CASE("root cause bounds: a flood of error codes and a long exception stay within the limits", "[root_cause]") {
  std::string log = "Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\nValueError: a\n";
  for (int i = 0; i < 30; ++i) log += "line " + std::to_string(i) + " of the message\n";
  for (int i = 0; i < 200; ++i) log += "EZ" + std::to_string(1000 + i) + ": error " + std::to_string(i) + "\n";
  const RootCause c = find_root_cause(log, 2);
  check_bounds(c);
  CHECK(has(c.text, "ValueError: a\nline 0 of the message\n"));
  CHECK(!has(c.text, "line 7 of the message"));  // 8 lines of an exception
  CHECK(c.error_code == "EZ1194: error 194");
  CHECK(!has(c.text, "EZ1193"));
  // Asked for 500 last lines: 50 at most.
  const RootCause all = find_root_cause(log, 500);
  check_bounds(all);
  CHECK(has(all.text, "ValueError: a\n"));
  CHECK(has(all.text, "...\nEZ1150: error 150\n"));
  CHECK(!has(all.text, "EZ1149:"));
}

TEST_CASE("root cause: at most 64 lines, the exception first, the oldest of the last lines dropped first",
          "[root_cause]") {
  std::string log =
      "Traceback (most recent call last):\n  File \"a.py\", line 9, in <module>\n    f()\n"
      "  File \"a.py\", line 5, in f\n    g()\n  File \"a.py\", line 2, in g\n    raise RuntimeError('x')\n"
      "RuntimeError: the real error\n\n";
  log += "--------------------\n- Ascend Error Message:\n--------------------\n";
  for (int i = 10; i < 30; ++i) {
    log += "EI00" + std::to_string(i) + ": code message " + std::to_string(i) + "\n";
    log += "    Solution: do " + std::to_string(i) + "\n    more " + std::to_string(i) + "\n";
  }
  log += "--------------------\n- Framework Error Message:\n--------------------\n";
  for (int i = 0; i < 20; ++i) log += "framework detail " + std::to_string(i) + "\n";
  log += "--------------------\n- C++ Call Stack: (For framework developers)\n--------------------\n";
  for (int i = 0; i < 100; ++i) log += "frame_" + std::to_string(i) + ".cc:1 F\n";
  const RootCause c = find_root_cause(log, 50);
  check_bounds(c);
  std::size_t lines = count_lines(c.text);
  for (std::size_t at = c.text.find("...\n"); at != std::string::npos; at = c.text.find("...\n", at + 1)) --lines;
  CHECK(lines == RootCauseLimits::lines);
  CHECK(has(c.text, "RuntimeError: the real error\n"));
  CHECK(c.error_code == "EI0024: code message 24");  // the first of the latest 6
  CHECK(has(c.text, "EI0024: code message 24\n    Solution: do 24\n    more 24\n"));
  CHECK(has(c.text, "- Framework Error Message:\nframework detail 0\n"));
  CHECK(!has(c.text, "framework detail 12\n"));  // 12 lines of a section
  CHECK(has(c.text,
            "Traceback (most recent call last):\n  File \"a.py\", line 9, in <module>\n    f()\n...\n"
            "  File \"a.py\", line 2, in g\n"));
  CHECK(has(c.text, "...\nframe_86.cc:1 F\n"));
  CHECK(ends_with(c.text, "frame_99.cc:1 F\n"));
}

TEST_CASE("failure report: the root cause of the failed rank, with its log path", "[root_cause][failure_report]") {
  TempDir dir;
  JobResult result;
  RankResult r;
  r.rank = 1;
  r.pid = 77;
  r.log_path = dir / "rank_1.log";
  write_file(r.log_path, read_file(layout("mindspore_ascend_hccl.log")));
  r.status = ExitStatus{ExitStatus::Kind::exited, 1};
  result.ranks.push_back(r);
  result.first_failure = 0;
  result.stop_reason = StopReason::rank_failed;
  const std::string report = failure_report(result);
  CHECK(has(report, "log: " + r.log_path + "\nroot cause, from its log (\"...\": lines skipped):\n"));
  CHECK(has(report, "RuntimeError: Preprocess failed before run graph 1.\n"));
  CHECK(has(report, "EI0006: Getting socket timed out."));
  CHECK(!has(report, "C++ Call Stack"));
}

TEST_CASE("a C++ fatal record is the error when no traceback precedes it", "[root_cause]") {
  // TensorFlow's layout, with its timestamp; then glog's and absl's; then look-alikes that are not.
  const RootCause tf = find_root_cause(
      "epoch 1\n"
      "2026-12-05 10:00:00.123456: F tensorflow/core/framework/tensor_shape.cc:187] Check failed: size >= 0 "
      "(-1 vs. 0)\n"
      "Aborted (core dumped)\n");
  CHECK(tf.found);
  CHECK(tf.exception == "F tensorflow/core/framework/tensor_shape.cc:187] Check failed: size >= 0 (-1 vs. 0)");
  CHECK(has(tf.text, "Check failed"));
  const RootCause glog = find_root_cause("[rank1]: F1205 10:00:00.123456  4711 op_kernel.cc:12] Check failed: ok\n");
  CHECK(glog.exception == "F1205 10:00:00.123456  4711 op_kernel.cc:12] Check failed: ok");
  for (const char* not_fatal :
       {"F means fine] ok\n", "Finished epoch 3: loss 0.1\n",
        "2026-12-05 10:00:00.123456: E tensorflow/core/x.cc:1] an error, not fatal\n", "F x:12] no file name\n"}) {
    INFO(not_fatal);
    const RootCause c = find_root_cause(not_fatal);
    CHECK_FALSE(c.found);
    CHECK(c.exception.empty());
  }
  // A traceback's exception stays the error; the record is shown beside it.
  const RootCause both = find_root_cause(
      "2026-12-05 10:00:00.1: F tensorflow/core/a.cc:9] Check failed: x\n"
      "Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\nValueError: late\n");
  CHECK(both.exception == "ValueError: late");
  CHECK(has(both.text, "Check failed: x"));
}

TEST_CASE("root cause of TensorFlow errors: its Python errors and its fatal C++ records", "[root_cause]") {
  const RootCause tf2 = read_root_cause(layout("tensorflow2_invalid_argument.log"));
  check_bounds(tf2);
  CHECK(tf2.exception.rfind("tensorflow.python.framework.errors_impl.InvalidArgumentError: ", 0) == 0);
  CHECK(has(tf2.exception, "Input to reshape is a tensor with 3 values, but the requested shape has 2"));
  const RootCause tf1 = read_root_cause(layout("tensorflow1_invalid_argument.log"));
  check_bounds(tf1);
  CHECK(tf1.exception ==
        "tensorflow.python.framework.errors_impl.InvalidArgumentError: Input to reshape is a tensor with 3 values, "
        "but the requested shape has 2");
  // The fatal record is the error of a process that aborted, shown among TensorFlow's info records.
  const RootCause check1 = read_root_cause(layout("tensorflow1_check_failed.log"));
  CHECK(check1.found);
  CHECK(check1.exception ==
        "F tensorflow/core/kernels/ctc_decoder_ops.cc:41] Check failed: 0 < m.dimension(1) (0 vs. 0)");
  const RootCause check2 = read_root_cause(layout("tensorflow2_check_failed.log"));
  check_bounds(check2);
  CHECK(check2.exception.rfind("F0000 00:00:", 0) == 0);
  CHECK(has(check2.exception, "tensor_shape.cc:362] Check failed: d < dims() (1 vs. 0)"));
  CHECK(has(check2.text, "Check failed"));
}
