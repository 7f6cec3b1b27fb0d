// <run>/events.txt: the job's journal on this server, one line per state
// it entered, event that changed nothing and notice (quiet ones included),
// each after its UTC time. What the console said, and more, after the fact.
#pragma once

#include <string>

#include "davincirun/unique_fd.hpp"

namespace davincirun::detail {

class JobJournal {
 public:
  /// Creates `path` (mode 0600; never an existing file). A log that cannot
  /// be created or written is given up quietly: the job does not depend on it.
  explicit JobJournal(const std::string& path);
  /// Appends "<UTC time with milliseconds> <line>\n".
  void write(const std::string& line);

 private:
  UniqueFd fd_;
};

}  // namespace davincirun::detail
