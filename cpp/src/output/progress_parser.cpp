// parse_progress(): the progress a line reports (rank_progress.hpp lists the
// forms). One pass over the line, no allocation: it runs on every line a
// rank writes.
#include <cstdint>
#include <optional>
#include <string_view>

#include "davincirun/rank_progress.hpp"

namespace davincirun {

namespace {

constexpr std::int64_t max_number = 1'000'000'000'000;

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }
bool is_alpha(char c) noexcept { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
char lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// A number at `i` ("45"), not part of a decimal ("1.5") or a longer word;
// moves `i` past it.
std::optional<std::int64_t> number_at(std::string_view s, std::size_t& i) noexcept {
  std::size_t j = i;
  std::int64_t n = 0;
  while (j < s.size() && is_digit(s[j])) {
    n = n * 10 + (s[j] - '0');
    if (n > max_number) return std::nullopt;
    ++j;
  }
  if (j == i) return std::nullopt;
  if (j < s.size() && (s[j] == '.' || is_alpha(s[j]))) return std::nullopt;  // 1.5, 3rd, 12ms
  i = j;
  return n;
}

// "N/M" at `i`: N, and M when a '/' and a number follow.
bool fraction_at(std::string_view s, std::size_t& i, std::int64_t& n, std::int64_t& total) noexcept {
  std::size_t j = i;
  const auto first = number_at(s, j);
  if (!first) return false;
  n = *first;
  total = -1;
  std::size_t k = j;
  while (k < s.size() && s[k] == ' ') ++k;
  if (k < s.size() && s[k] == '/') {
    ++k;
    while (k < s.size() && s[k] == ' ') ++k;
    if (const auto second = number_at(s, k); second && *second > 0) {
      total = *second;
      j = k;
    }
  }
  i = j;
  return true;
}

enum class Word { none, epoch, step };

// The progress word that ends at `end` (exclusive), ignoring case: "epoch",
// "step", "iter", "iteration", "batch", each not the end of a longer word.
Word word_before(std::string_view s, std::size_t end) noexcept {
  static constexpr struct {
    std::string_view text;
    Word word;
  } words[] = {{"epoch", Word::epoch},
               {"step", Word::step},
               {"iter", Word::step},
               {"iteration", Word::step},
               {"batch", Word::step}};
  for (const auto& w : words) {
    if (end < w.text.size()) continue;
    const std::size_t begin = end - w.text.size();
    bool same = true;
    for (std::size_t k = 0; k < w.text.size() && same; ++k) same = lower(s[begin + k]) == w.text[k];
    // "global_step 40" counts; "timestep 40" does not
    if (same && (begin == 0 || s[begin - 1] == '_' || !is_alpha(s[begin - 1]))) return w.word;
  }
  return Word::none;
}

// After a word: ':', '=', '[', '#' and spaces, at most 3 characters.
std::size_t skip_separators(std::string_view s, std::size_t i) noexcept {
  for (int n = 0; n < 3 && i < s.size() && (s[i] == ' ' || s[i] == ':' || s[i] == '=' || s[i] == '[' || s[i] == '#');
       ++n) {
    ++i;
  }
  return i;
}

// tqdm's "| 45/100 [" or "45it [", Keras's "45/100 [====": a count before a
// '[' that is not a word's number.
bool bar_count_at(std::string_view s, std::size_t& i, std::int64_t& n, std::int64_t& total) noexcept {
  std::size_t j = i;
  if (fraction_at(s, j, n, total)) {
    while (j < s.size() && s[j] == ' ') ++j;
    if (total <= 0 || j >= s.size() || s[j] != '[') return false;
    i = j;
    return true;
  }
  std::int64_t value = 0;  // "45it [": a count without a total
  while (j < s.size() && is_digit(s[j]) && value <= max_number) value = value * 10 + (s[j++] - '0');
  if (value > max_number || s.substr(j, 4) != "it [") return false;
  n = value;
  total = -1;
  i = j + 4;
  return true;
}

}  // namespace

std::optional<ProgressReading> parse_progress(std::string_view line) noexcept {
  ProgressReading r;
  bool found = false;
  std::size_t i = 0;
  while (i < line.size()) {
    if (!is_digit(line[i]) || (i > 0 && (is_digit(line[i - 1]) || line[i - 1] == '.'))) {
      ++i;
      continue;
    }
    // A number: which word (if any) it belongs to.
    std::size_t w = i;
    while (
        w > 0 && i - w < 3 &&
        (line[w - 1] == ' ' || line[w - 1] == ':' || line[w - 1] == '=' || line[w - 1] == '[' || line[w - 1] == '#')) {
      --w;
    }
    const Word word = skip_separators(line, w) == i ? word_before(line, w) : Word::none;
    std::size_t j = i;
    std::int64_t n = 0;
    std::int64_t total = -1;
    if (word != Word::none && fraction_at(line, j, n, total)) {
      if (word == Word::epoch && r.epoch < 0) {
        r.epoch = n;
        r.epochs = total;
        found = true;
      } else if (word == Word::step && r.step < 0) {
        r.step = n;
        r.steps = total;
        found = true;
      }
    } else if (word == Word::none && r.step < 0 && (i == 0 || !is_alpha(line[i - 1])) &&
               bar_count_at(line, j, n, total)) {
      r.step = n;
      r.steps = total;
      found = true;
    }
    i = j > i ? j : i + 1;
  }
  if (!found) return std::nullopt;
  return r;
}

}  // namespace davincirun
