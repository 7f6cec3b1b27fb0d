// journal_events(): the journal's lines as the record's events. The
// journal's transition lines are the life cycle's own ("running ->
// stopping on rank_failed", supervisor_states.cpp), so their parts are
// read back rather than carried twice.
#include <string>
#include <string_view>

#include "davincirun/job_types.hpp"
#include "davincirun/lifecycle.hpp"
#include "record/job_record.hpp"

namespace davincirun::detail {

namespace {

bool is_word(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || c == '_')) return false;
  }
  return true;
}

// "from -> to on event": the states' names, or false.
bool transition(std::string_view text, std::string_view& from, std::string_view& to) {
  const auto arrow = text.find(" -> ");
  const auto on = text.find(" on ", arrow == std::string_view::npos ? 0 : arrow);
  if (arrow == std::string_view::npos || on == std::string_view::npos) return false;
  from = text.substr(0, arrow);
  to = text.substr(arrow + 4, on - arrow - 4);
  return is_word(from) && is_word(to) && is_word(text.substr(on + 4));
}

// "event in state: answer (why)": an event that changed nothing.
bool unchanged(std::string_view text) {
  const auto in = text.find(" in ");
  const auto colon = text.find(": ");
  return in != std::string_view::npos && colon != std::string_view::npos && in < colon && is_word(text.substr(0, in)) &&
         is_word(text.substr(in + 4, colon - in - 4));
}

const char* kind_of(std::string_view from, std::string_view to) {
  if (to == to_string(JobState::stopping) || to == to_string(JobState::killing)) return "stop";
  if (to == to_string(JobState::restarting) || from == to_string(JobState::restarting)) return "restart";
  return "state";
}

}  // namespace

RecordJson journal_events(const std::vector<JournalEntry>& journal, const std::string& server_id) {
  RecordJson events = RecordJson::array();
  for (const JournalEntry& e : journal) {
    std::string_view from;
    std::string_view to;
    const char* kind = "notice";
    if (transition(e.text, from, to)) {
      kind = kind_of(from, to);
    } else if (unchanged(e.text)) {
      continue;
    }
    events.push_back({{"time", seconds_since_epoch(e.time)},
                      {"server_id", server_id},
                      {"kind", kind},
                      {"role", nullptr},
                      {"rank", nullptr},
                      {"text", e.text}});
  }
  return events;
}

}  // namespace davincirun::detail
