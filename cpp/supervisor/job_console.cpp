#include "job_console.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <utility>

#include "plan/job_engines.hpp"

namespace davincirun::detail {

JobConsole::StdoutKind JobConsole::classify_stdout() {
  struct stat st{};
  if (::fstat(STDOUT_FILENO, &st) != 0) return StdoutKind::other;
  if (S_ISREG(st.st_mode)) return StdoutKind::file;
  struct stat null_st{};
  if (S_ISCHR(st.st_mode) && ::stat("/dev/null", &null_st) == 0 && st.st_rdev == null_st.st_rdev) {
    return StdoutKind::null;
  }
  return StdoutKind::other;
}

namespace {

bool set(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0';
}

// A task of an engine that starts one per node (plan/job_engines.hpp). Its
// pseudo-terminal is the engine's, which merges every task's output into
// its own: escape sequences and a redrawn status line would only garble it.
bool engine_task() { return engine_of_task(Environment::current()) != nullptr; }

// Prefixes in colour on a person's terminal, unless NO_COLOR is set
// (https://no-color.org); such a terminal also gets the ranks' progress
// bars in a status line. Under an engine, plain lines, unless FORCE_COLOR
// is set (colour only, never the status line).
ConsoleStyle terminal_style() {
  const bool colour = !set("NO_COLOR");
  const bool engine = engine_task();
  const bool terminal = ::isatty(STDOUT_FILENO) == 1;
  const bool styled = colour && (!engine || set("FORCE_COLOR"));
  return ConsoleStyle{styled && terminal, styled && ::isatty(STDERR_FILENO) == 1, terminal && !engine};
}

}  // namespace

JobConsole::JobConsole(ConsoleRoute route, Lifeline& lifeline, std::vector<std::string> labels, StdoutKind stdout_kind)
    // Lines to stdout unless it is /dev/null; notices to stderr.
    : stdio_(stdout_kind == StdoutKind::null ? -1 : STDOUT_FILENO, STDERR_FILENO, terminal_style(), std::move(labels)),
      relay_(lifeline) {
  direct_ = route == ConsoleRoute::relay   ? static_cast<LineSink*>(&relay_)
            : route == ConsoleRoute::stdio ? static_cast<LineSink*>(&stdio_)
                                           : static_cast<LineSink*>(&null_);
  // A console that falls behind (a terminal or pipe nobody reads) must never
  // slow the ranks, so it is fed through a bounded queue that skips lines.
  // A regular file is written directly, like the log files: it never "stops
  // reading", and `davincirun ... > out.txt` must get every line.
  if ((route == ConsoleRoute::stdio && stdout_kind == StdoutKind::other) || route == ConsoleRoute::relay) {
    queued_.emplace(*direct_);
  }
  sink_ = queued_ ? static_cast<LineSink*>(&*queued_) : direct_;
}

void JobConsole::flush() {
  queued_.reset();  // its destructor writes out what is queued
  sink_ = direct_;
}

}  // namespace davincirun::detail
