#include "job_journal.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <ctime>

#include <fmt/format.h>

#include "common/text.hpp"

namespace davincirun::detail {

JobJournal::JobJournal(const std::string& path)
    : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600)) {}

void JobJournal::write(const std::string& line, bool keep) {
  using namespace std::chrono;
  const auto now = system_clock::now();
  if (keep && entries_.size() < max_entries) entries_.push_back({now, line});
  if (!fd_) return;
  const auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  const std::string text =
      fmt::format("{}.{:03}Z {}\n", utc_time(system_clock::to_time_t(now), "%Y-%m-%dT%H:%M:%S"), ms, line);
  // One write(2) of a whole line: O_APPEND keeps lines whole.
  if (::write(fd_.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) fd_.reset();
}

}  // namespace davincirun::detail
