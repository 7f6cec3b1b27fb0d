// <run>/events.txt: the job's journal on this server, one line per state
// it entered, event that changed nothing and notice (quiet ones included),
// each after its UTC time. What the console said, and more, after the fact.
#pragma once

#include <string>
#include <vector>

#include "davincirun/unique_fd.hpp"
#include "record/job_record.hpp"

namespace davincirun::detail {

class JobJournal {
 public:
  /// Creates `path` (mode 0600; never an existing file). A log that cannot
  /// be created or written is given up quietly: the job does not depend on it.
  explicit JobJournal(const std::string& path);
  /// Appends "<UTC time with milliseconds> <line>\n"; `keep`: also into
  /// entries(), for the job record.
  void write(const std::string& line, bool keep = true);
  /// The lines kept, the first max_entries of them.
  const std::vector<JournalEntry>& entries() const noexcept { return entries_; }
  static constexpr std::size_t max_entries = 10'000;

 private:
  UniqueFd fd_;
  std::vector<JournalEntry> entries_;
};

}  // namespace davincirun::detail
