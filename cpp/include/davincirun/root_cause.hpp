// The root cause of a failed rank, found in its log: the lines that say
// what went wrong, which the last lines of a MindSpore, CANN or PyTorch
// failure rarely are (they are C++ call-stack frames, or a launcher's
// summary).
//
// The block is an excerpt of the log: whole lines, in the log's order, as
// a terminal shows them, with a line "..." wherever lines were skipped
// (rules of dashes and blank lines are skipped without one). It
// holds, each part bounded (see the constants below):
//
//  - the last Python traceback's head: its "Traceback (most recent call
//    last):" line, its first frame (the caller's code) and its last frame
//    (where the exception was raised);
//  - that traceback's exception: the first line that follows its frames
//    ("RuntimeError: ...") and the lines of its message, up to a blank
//    line, a line of dashes, a log record ("[ERROR] ...") or PyTorch's
//    "Exception raised from ..." / "frame #N" C++ frames;
//  - when that exception was raised while handling another one ("The above
//    exception was the direct cause of the following exception:", "During
//    handling of the above exception, another exception occurred:"), or
//    when it is torchrun's ChildFailedError, the exception line of the
//    traceback before it too (the original error, a worker's error);
//  - the sections MindSpore prints after an exception, "- Ascend Error
//    Message:" and "- Framework Error Message:" (CANN's own "Ascend Error
//    Message:" too), without their dashed rules, up to the next rule: the
//    "- C++ Call Stack:" section that follows is never shown;
//  - CANN error-code lines, "EI0006: ...", "EJ0001: ...", "EZ9999: ..." (a
//    code is E, a letter for the component, four digits, then ':' or a
//    space), each with its indented message lines ("Solution: ...",
//    "TraceBack (most recent call last):", ...), the same line once;
//  - fatal records of a C++ log, which abort the process without a Python
//    traceback: TensorFlow's "2024-05-01 10:00:00.123456: F tensorflow/
//    core/framework/tensor_shape.cc:187] Check failed: ..." and glog's or
//    absl's "F0501 10:00:00.123456 1234 file.cc:12] ..." (the latest few,
//    distinct);
//  - torchrun's "Root Cause (first observed failure):" section;
//  - the log's last lines (its trailing blank lines not counted).
//
// Every line of a traceback may carry the prefix its "Traceback" line has
// (torchrun's "[rank1]: ", "[default0]:"): it is ignored when the lines are
// told apart, and shown.
//
// Sources of the layouts:
//  - Python: the traceback module's format ("Traceback (most recent call
//    last):", frames indented by two spaces, the exception line unindented,
//    the chaining sentences), https://docs.python.org/3/library/traceback.html;
//    recorded from CPython 3.11 in tests/data/failure_logs/.
//  - MindSpore: the exception then "- Ascend Error Message:", "- Framework
//    Error Message:" and "- C++ Call Stack: (For framework developers)"
//    sections between rules of dashes: MindSpore's tutorial "Error
//    Reporting Analysis" (debug/error_analysis, r2.x) and its CANN error
//    cases page; recorded from MindSpore 2.10 (CPU) in tests/data/failure_logs/.
//  - CANN: error codes of six characters, E, a component letter, four
//    digits, 9000-9999 being internal errors ("EZ9999: Inner Error!"), with
//    indented "Solution:" and "TraceBack (most recent call last):" lines:
//    the CANN error-reporting API (ReportPredefinedErrMsg,
//    ReportInnerErrMsg) and troubleshooting guide ("AI Core Error"),
//    hiascend.com.
//  - TensorFlow: its Python errors are exceptions of
//    tensorflow.python.framework.errors_impl ("...InvalidArgumentError:
//    ..."), shown as any exception; its C++ log records are "<date> <time>:
//    <severity letter> <file>:<line>] <message>" (platform/default/
//    logging.cc: under tensorflow/core in 1.15, tsl in 2.x), F being fatal
//    ("Check failed:");
//    recorded from TensorFlow 1.15.5 and 2.21 in tests/data/failure_logs/.
//  - PyTorch: torch.distributed.elastic's ChildFailedError summary ("Root
//    Cause (first observed failure):" between rules of '='), its "[rankN]:"
//    line prefixes, and c10's "Exception raised from ..." frames,
//    https://pytorch.org/docs/stable/elastic/errors.html.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace davincirun {

/// Bounds of a root-cause block (see the file comment for its parts).
struct RootCauseLimits {
  /// Bytes read from the end of a log file: older lines are never read.
  static constexpr std::size_t read_bytes = std::size_t{256} * 1024;
  /// A longer line is cut to this many bytes (never inside a UTF-8
  /// sequence) and ends with "…".
  static constexpr std::size_t line_bytes = 400;
  /// Lines of the block, "..." markers not counted. The parts are taken in
  /// this order until it is reached: exception, earlier exception, fatal
  /// records, error codes, sections, traceback head, last lines (the newest first).
  static constexpr std::size_t lines = 64;
  /// Lines of an exception (its first line included).
  static constexpr std::size_t exception_lines = 8;
  /// Frame lines of the traceback head, for its first frame and its last.
  static constexpr std::size_t frame_lines = 3;
  /// Distinct error-code lines, the latest kept, and message lines of each.
  static constexpr std::size_t error_codes = 6;
  static constexpr std::size_t error_code_message_lines = 3;
  /// Distinct fatal records of a C++ log, the latest kept.
  static constexpr std::size_t fatal_records = 3;
  /// Content lines of each section.
  static constexpr std::size_t section_lines = 12;
  /// The largest `tail_lines` taken.
  static constexpr std::size_t tail_lines = 50;
  /// The default number of last lines.
  static constexpr std::size_t default_tail_lines = 5;
};

/// What find_root_cause() found.
struct RootCause {
  /// The block: lines ending in '\n', valid UTF-8 (invalid bytes become
  /// U+FFFD), no control characters or escape sequences (a tab becomes a
  /// space), at most RootCauseLimits::lines lines of at most line_bytes
  /// bytes, plus "..." lines. Empty only for a log with no visible line.
  std::string text;
  /// The error that ended the process: the exception line, without a
  /// traceback prefix ("RuntimeError: ..."); when the last exception's
  /// message is empty (ChildFailedError: ) and an earlier one is shown, that
  /// one; without a traceback, the last fatal record of a C++ log, from its
  /// severity letter on ("F tensorflow/...] Check failed: ..."). Else empty.
  std::string exception;
  /// The most telling CANN error-code line ("EI0006: ..."): of the latest
  /// RootCauseLimits::error_codes distinct ones, the first (in the log's
  /// order) that says more than "Inner Error!", else the first. Empty
  /// without one.
  std::string error_code;
  /// A traceback, a fatal record, an error code or a section was found:
  /// `text` is more than the last lines.
  bool found = false;
  /// Where it was found: "its log", or "its torch error file" (rank_root_cause()).
  std::string source = "its log";
  /// What to do, where a framework's own message misleads (rank_root_cause()):
  /// one sentence, or empty.
  std::string hint;
};

/// The root cause in `log` (a log's text, or the end of it: a first line
/// may be partial), with its last `tail_lines` lines (at most
/// RootCauseLimits::tail_lines). It reads all of `log`, in time and memory
/// linear in its size: give it a bounded text (read_root_cause() reads
/// RootCauseLimits::read_bytes). Never throws but std::bad_alloc.
RootCause find_root_cause(std::string_view log, std::size_t tail_lines = RootCauseLimits::default_tail_lines);

/// find_root_cause() of the last RootCauseLimits::read_bytes of the file at
/// `path` (when the file is longer, its first line there, partial, is
/// dropped). An empty RootCause when the file cannot be read or is empty.
RootCause read_root_cause(const std::string& path, std::size_t tail_lines = RootCauseLimits::default_tail_lines);

/// The file a rank's torch `@record` writes its exception to, which
/// TORCHELASTIC_ERROR_FILE names: beside its log, the log's name with
/// ".error.json" for ".log" ("rank_3.device_3.error.json").
std::string torch_error_file_for(const std::string& log_path);

/// A failed rank's root cause: from the error file torch's `@record`
/// wrote (torch_error_file_for(log_path)) when there is one that parses,
/// else read_root_cause(log_path). The error file is what torch 2.x
/// torch/distributed/elastic/multiprocessing/errors/error_handler.py
/// writes, {"message": {"message": "<Type>: <text>", "extraInfo":
/// {"py_callstack": "<traceback>", "timestamp": "<seconds>"}}} (or a
/// "message" that is a string); its first MiB is read. From the file, the
/// block is the root cause of its traceback (find_root_cause()),
/// `exception` its message, `source` "its torch error file". `hint` is set
/// where a framework's message misleads: MindSpore's "... without using
/// 'mpirun' ..." RuntimeError from communication.init() (MindSpore 2.x,
/// collective_manager.cc), which its CPU build raises for a rank table: the
/// hint names --launch-mode dynamic-cluster. Never throws but std::bad_alloc.
RootCause rank_root_cause(const std::string& log_path, std::size_t tail_lines = RootCauseLimits::default_tail_lines);

}  // namespace davincirun
