#include "job_console.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <utility>

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

// Prefixes in colour on a terminal, unless NO_COLOR is set
// (https://no-color.org); a terminal also gets the ranks' progress bars in
// a status line.
ConsoleStyle terminal_style() {
  const char* no_colour = std::getenv("NO_COLOR");
  const bool colour = no_colour == nullptr || *no_colour == '\0';
  const bool terminal = ::isatty(STDOUT_FILENO) == 1;
  return ConsoleStyle{colour && terminal, colour && ::isatty(STDERR_FILENO) == 1, terminal};
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
