// find_root_cause(), read_root_cause(): the lines of a rank's log that say
// why it failed (the layouts are in root_cause.hpp).
#include "davincirun/root_cause.hpp"

#include <algorithm>
#include <vector>

#include "common/text.hpp"
#include "davincirun/display_width.hpp"
#include "output/log_tail.hpp"

namespace davincirun {

namespace {

using Limits = RootCauseLimits;
using Lines = std::vector<std::string>;
constexpr std::size_t npos = std::string::npos;
constexpr std::string_view traceback_head = "Traceback (most recent call last):";

bool starts_with(std::string_view s, std::string_view start) { return s.substr(0, start.size()) == start; }

bool ends_with(std::string_view s, std::string_view end) {
  return s.size() >= end.size() && s.substr(s.size() - end.size()) == end;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

std::size_t leading_spaces(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return i;
}

// One line as a terminal shows it, made safe to print: escape sequences and
// control characters dropped, tabs as spaces, invalid UTF-8 as U+FFFD, cut
// to Limits::line_bytes.
std::string clean_line(std::string_view raw) {
  const bool cut_raw = raw.size() > Limits::line_bytes * 4;  // bounds the work on a huge line
  if (cut_raw) raw = raw.substr(0, Limits::line_bytes * 4);
  std::string spaced(raw);
  std::replace(spaced.begin(), spaced.end(), '\t', ' ');
  std::string text = drawable_text(spaced);
  if (text.size() > Limits::line_bytes || cut_raw) {
    text.resize(detail::utf8_prefix_length(text, Limits::line_bytes));
    text += "\xE2\x80\xA6";  // U+2026
  }
  return text;
}

// The log's lines as shown (each redrawn line in its last state), cleaned.
Lines clean_lines(std::string_view log) {
  Lines lines;
  for (const std::string_view line : detail::shown_lines(log)) lines.push_back(clean_line(line));
  return lines;
}

// A rule: ten or more '-' (or '=' when `equals_too`) and nothing else.
bool is_rule(std::string_view s, bool equals_too = true) {
  s = trim(s);
  if (s.size() < 10) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return c == '-' || (equals_too && c == '='); }) &&
         (equals_too || s.front() == '-');
}

bool is_log_record(std::string_view s) {
  for (std::string_view level : {"[ERROR]", "[WARNING]", "[INFO]", "[DEBUG]", "[CRITICAL]"}) {
    if (starts_with(s, level)) return true;
  }
  return false;
}

// "[rank1]: EI0006: ..." -> "EI0006: ...": a short bracketed prefix dropped.
std::string_view without_bracket_prefix(std::string_view s) {
  s = trim(s);
  if (s.empty() || s.front() != '[') return s;
  const std::size_t close = s.find(']');
  if (close == npos || close > 24) return s;
  s.remove_prefix(close + 1);
  if (!s.empty() && s.front() == ':') s.remove_prefix(1);
  return trim(s);
}

// CANN's error codes: E, a component letter, four digits, then ':' or ' '.
bool is_error_code_line(std::string_view s) {
  s = without_bracket_prefix(s);
  if (s.size() < 7 || s[0] != 'E' || s[1] < 'A' || s[1] > 'Z') return false;
  for (std::size_t i = 2; i < 6; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return s[6] == ':' || s[6] == ' ';
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A fatal record of a C++ log, which aborts the process with no Python
// traceback: TensorFlow's "<date> <time>: F <file>:<line>] <message>" and
// glog's or absl's "F<MMDD> <time> <thread> <file>:<line>] <message>"
// (TensorFlow's "Check failed: ..."). Returns the text from its severity
// letter on, or an empty view.
std::string_view fatal_record(std::string_view s) {
  s = without_bracket_prefix(s);
  // TensorFlow's own timestamp, "2024-05-01 10:00:00.123456: ".
  if (s.size() > 21 && s[4] == '-' && s[7] == '-' && s[10] == ' ' && s[13] == ':') {
    const std::size_t colon = s.find(": ", 19);
    if (colon == npos || colon > 32) return {};
    s.remove_prefix(colon + 2);
  }
  if (s.size() < 8 || s[0] != 'F') return {};
  const bool tf_style = s[1] == ' ';
  const bool glog_style = all_digits(s.substr(1, 4)) && s.size() > 5 && s[5] == ' ';
  if (!tf_style && !glog_style) return {};
  // "<file>:<line>] " before the message, within the record's head.
  const std::size_t close = s.find("] ");
  if (close == npos || close > 160) return {};
  const std::size_t colon = s.rfind(':', close);
  if (colon == npos || !all_digits(s.substr(colon + 1, close - colon - 1)) || s.substr(0, colon).find('.') == npos) {
    return {};
  }
  return trim(s);
}

enum class Section { none, error_message, call_stack, torch_root_cause };

Section section_of(std::string_view s) {
  s = trim(s);
  if (starts_with(s, "- ")) s = trim(s.substr(2));
  if (s.size() <= 40 && ends_with(s, "Error Message:")) return Section::error_message;
  if (starts_with(s, "C++ Call Stack")) return Section::call_stack;
  if (starts_with(s, "Root Cause (first observed failure)")) return Section::torch_root_cause;
  return Section::none;
}

// The lines chosen for the block, at most Limits::lines; the first parts
// added win.
class Picker {
 public:
  explicit Picker(std::size_t n) : chosen_(n, false) {}
  void add(std::size_t i) {
    if (i < chosen_.size() && !chosen_[i] && count_ < Limits::lines) {
      chosen_[i] = true;
      ++count_;
    }
  }
  void add_range(std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) add(i);
  }
  // The newest first: what the limit cuts is the oldest.
  void add_range_backwards(std::size_t begin, std::size_t end) {
    for (std::size_t i = end; i-- > begin;) add(i);
  }
  bool chosen(std::size_t i) const { return chosen_[i]; }

 private:
  std::vector<bool> chosen_;
  std::size_t count_ = 0;
};

// One Python traceback: its head line, its frames [head + 1, frames_end),
// its exception lines [exception, exception_end) (empty when cut off).
struct Traceback {
  std::size_t head = npos;
  std::string prefix;  // what precedes "Traceback" on its line ("[rank1]: ")
  std::size_t frames_end = 0;
  std::size_t exception = npos;
  std::size_t exception_end = npos;
};

std::string_view body(const Traceback& tb, std::string_view line) {
  if (!tb.prefix.empty() && starts_with(line, tb.prefix)) line.remove_prefix(tb.prefix.size());
  return line;
}

bool continues_exception(std::string_view s) {
  const std::string_view t = trim(s);
  return !t.empty() && !is_rule(t, false) && !is_log_record(t) && !starts_with(t, "Exception raised from ") &&
         !starts_with(t, "frame #") && s.find(traceback_head) == npos && section_of(t) == Section::none;
}

std::size_t last_traceback_before(const Lines& lines, std::size_t end) {
  for (std::size_t i = end; i-- > 0;) {
    if (lines[i].find(traceback_head) != npos) return i;
  }
  return npos;
}

Traceback parse_traceback(const Lines& lines, std::size_t head) {
  Traceback tb;
  tb.head = head;
  tb.prefix = lines[head].substr(0, lines[head].find(traceback_head));
  // Frames are indented deeper than the "Traceback" line itself.
  const std::size_t base = leading_spaces(tb.prefix);
  std::size_t i = head + 1;
  while (i < lines.size()) {
    const std::string_view b = body(tb, lines[i]);
    if (trim(b).empty() || leading_spaces(b) <= base) break;
    ++i;
  }
  tb.frames_end = i;
  if (i < lines.size() && !trim(body(tb, lines[i])).empty()) {
    tb.exception = i;
    std::size_t j = i + 1;
    // A prefixed traceback's message lines carry its prefix too (another rank's lines may follow).
    while (j < lines.size() && j - i < Limits::exception_lines && starts_with(lines[j], tb.prefix) &&
           continues_exception(body(tb, lines[j])))
      ++j;
    tb.exception_end = j;
  }
  return tb;
}

std::string exception_text(const Lines& lines, const Traceback& tb) {
  if (tb.exception == npos) return {};
  return std::string(trim(body(tb, lines[tb.exception])));
}

// "ChildFailedError: " and the like: an exception line whose message is empty.
bool says_nothing(std::string_view exception) {
  exception = trim(exception);
  return exception.empty() || exception.back() == ':';
}

// The earlier exception shown with the last one: the original error of a
// chain, or a worker's error under torchrun's ChildFailedError.
void add_earlier_exception(const Lines& lines, const Traceback& last, Picker& pick, RootCause& out) {
  const std::string text = exception_text(lines, last);
  std::size_t k = last.head;
  while (k > 0 && trim(body(last, lines[k - 1])).empty()) --k;
  const bool chained = k > 0 && (lines[k - 1].find("The above exception was the direct cause") != npos ||
                                 lines[k - 1].find("During handling of the above exception") != npos);
  if (!chained && text.find("ChildFailedError") == npos) return;
  const std::size_t head = last_traceback_before(lines, last.head);
  if (head == npos) return;
  const Traceback earlier = parse_traceback(lines, head);
  if (earlier.exception == npos) return;
  pick.add_range(earlier.exception, std::min(earlier.exception_end, earlier.exception + 3));
  if (chained) pick.add(k - 1);
  if (says_nothing(text)) out.exception = exception_text(lines, earlier);
}

void add_traceback_head(const Lines& lines, const Traceback& tb, Picker& pick) {
  pick.add(tb.head);
  // The first frame: its "File" line and what follows it, up to the next frame.
  for (std::size_t i = tb.head + 1; i < tb.frames_end && i < tb.head + 1 + Limits::frame_lines; ++i) {
    if (i > tb.head + 1 && starts_with(trim(body(tb, lines[i])), "File ")) break;
    pick.add(i);
  }
  // The last frame, where the exception was raised.
  for (std::size_t i = tb.frames_end; i-- > tb.head + 1;) {
    if (!starts_with(trim(body(tb, lines[i])), "File ")) continue;
    pick.add_range(i, std::min(tb.frames_end, i + Limits::frame_lines));
    break;
  }
}

void add_error_codes(const Lines& lines, Picker& pick, RootCause& out) {
  // The latest distinct code lines, each at its first place (where its
  // message lines are; a repeat often has none).
  std::vector<std::size_t> codes;
  for (std::size_t i = lines.size(); i-- > 0;) {
    if (!is_error_code_line(lines[i])) continue;
    const std::string_view text = without_bracket_prefix(lines[i]);
    auto seen = std::find_if(codes.begin(), codes.end(),
                             [&](std::size_t c) { return without_bracket_prefix(lines[c]) == text; });
    if (seen != codes.end()) {
      *seen = i;
    } else if (codes.size() < Limits::error_codes) {
      codes.push_back(i);
    }
  }
  std::sort(codes.begin(), codes.end());
  for (std::size_t c : codes) {
    pick.add(c);
    for (std::size_t i = c + 1; i < lines.size() && i <= c + Limits::error_code_message_lines; ++i) {
      if (leading_spaces(lines[i]) == 0 || trim(lines[i]).empty() || is_error_code_line(lines[i])) break;
      pick.add(i);
    }
  }
  std::string first;
  for (std::size_t c : codes) {
    if (!pick.chosen(c)) continue;
    const std::string_view text = without_bracket_prefix(lines[c]);
    if (first.empty()) first = std::string(text);
    if (trim(text.substr(7)) != "Inner Error!") {
      out.error_code = std::string(text);
      return;
    }
  }
  out.error_code = first;
}

// The latest fatal records of a C++ log, distinct; the last one is the
// error that ended the process when no traceback says otherwise.
bool add_fatal_records(const Lines& lines, Picker& pick, RootCause& out) {
  std::vector<std::string_view> seen;
  for (std::size_t i = lines.size(); i-- > 0 && seen.size() < Limits::fatal_records;) {
    const std::string_view record = fatal_record(lines[i]);
    if (record.empty() || std::find(seen.begin(), seen.end(), record) != seen.end()) continue;
    if (seen.empty() && out.exception.empty()) out.exception = std::string(record);
    seen.push_back(record);
    pick.add(i);
  }
  return !seen.empty();
}

// The last section of each header ("- Ascend Error Message:", "- Framework
// Error Message:", "Root Cause (first observed failure):"), without rules.
bool add_sections(const Lines& lines, Picker& pick) {
  std::vector<std::string_view> headers;
  bool any = false;
  for (std::size_t h = lines.size(); h-- > 0;) {
    const Section kind = section_of(lines[h]);
    if (kind != Section::error_message && kind != Section::torch_root_cause) continue;
    const std::string_view header = trim(lines[h]);
    if (std::find(headers.begin(), headers.end(), header) != headers.end()) continue;
    headers.push_back(header);
    any = true;
    pick.add(h);
    std::size_t i = h + 1;
    while (i < lines.size() && is_rule(lines[i])) ++i;
    for (std::size_t taken = 0; i < lines.size() && taken < Limits::section_lines; ++i) {
      const std::string_view t = trim(lines[i]);
      if (is_rule(t) || section_of(t) != Section::none || lines[i].find(traceback_head) != npos) break;
      if (t.empty()) continue;
      pick.add(i);
      ++taken;
    }
  }
  return any;
}

}  // namespace

RootCause find_root_cause(std::string_view log, std::size_t tail_lines) {
  RootCause out;
  const Lines lines = clean_lines(log);
  Picker pick(lines.size());

  const std::size_t head = last_traceback_before(lines, lines.size());
  Traceback tb;
  if (head != npos) {
    tb = parse_traceback(lines, head);
    out.exception = exception_text(lines, tb);
    if (tb.exception != npos) pick.add_range(tb.exception, tb.exception_end);
    add_earlier_exception(lines, tb, pick, out);
  }
  const bool fatal = add_fatal_records(lines, pick, out);
  add_error_codes(lines, pick, out);
  const bool sections = add_sections(lines, pick);
  if (head != npos) add_traceback_head(lines, tb, pick);
  out.found = head != npos || fatal || !out.error_code.empty() || sections;

  std::size_t end = lines.size();
  while (end > 0 && trim(lines[end - 1]).empty()) --end;
  const std::size_t tail = std::min({tail_lines, Limits::tail_lines, end});
  pick.add_range_backwards(end - tail, end);

  std::size_t last = npos;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!pick.chosen(i)) continue;
    // A marker where lines of substance were skipped; skipped rules and blank lines need none.
    if (last != npos && std::any_of(lines.begin() + static_cast<std::ptrdiff_t>(last) + 1,
                                    lines.begin() + static_cast<std::ptrdiff_t>(i),
                                    [](const std::string& l) { return !trim(l).empty() && !is_rule(l); })) {
      out.text += "...\n";
    }
    out.text += lines[i];
    out.text += '\n';
    last = i;
  }
  return out;
}

RootCause read_root_cause(const std::string& path, std::size_t tail_lines) {
  const detail::LogEnd end = detail::read_log_end(path, Limits::read_bytes);
  if (end.text.empty()) return {};
  std::string_view text(end.text);
  if (end.cut) {  // the first line read is partial: drop it, when it is not all there is
    const std::size_t nl = text.find('\n');
    if (nl != npos) text.remove_prefix(nl + 1);
  }
  return find_root_cause(text, tail_lines);
}

}  // namespace davincirun
