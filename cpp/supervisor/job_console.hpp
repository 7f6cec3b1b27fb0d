// Where the supervisor process sends the ranks' live lines, as the launcher
// asked (ConsoleRoute): its own stdout and stderr, the lifeline, or nowhere.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "davincirun/console_sink.hpp"
#include "davincirun/non_blocking_sink.hpp"
#include "job/job_protocol.hpp"
#include "lifeline.hpp"

namespace davincirun::detail {

class JobConsole {
 public:
  enum class StdoutKind { file, null, other };

  /// `labels`: each rank's label by index, for a terminal's status line.
  JobConsole(ConsoleRoute route, Lifeline& lifeline, std::vector<std::string> labels)
      : JobConsole(route, lifeline, std::move(labels), classify_stdout()) {}
  JobConsole(const JobConsole&) = delete;
  JobConsole& operator=(const JobConsole&) = delete;

  /// The sink to give the ranks' logs and the supervisor.
  LineSink& sink() noexcept { return *sink_; }
  /// Writes out whatever is queued; afterwards sink() writes directly. Call
  /// before the frame that must follow every line (started... error, result).
  void flush();

 private:
  JobConsole(ConsoleRoute route, Lifeline& lifeline, std::vector<std::string> labels, StdoutKind stdout_kind);
  static StdoutKind classify_stdout();

  FdLineSink stdio_;
  RelaySink relay_;
  NullLineSink null_;
  std::optional<NonBlockingSink> queued_;
  LineSink* direct_;  // where lines go once flushed
  LineSink* sink_;
};

}  // namespace davincirun::detail
