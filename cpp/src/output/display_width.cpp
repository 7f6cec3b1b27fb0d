#include "davincirun/display_width.hpp"

#include <algorithm>
#include <iterator>

namespace davincirun {

namespace {

struct CodePointRange {
  char32_t first;
  char32_t last;
};

#include "output/display_width_table.inc"

bool in(const CodePointRange* begin, const CodePointRange* end, char32_t cp) noexcept {
  // The first range that does not end before cp.
  const CodePointRange* it =
      std::lower_bound(begin, end, cp, [](const CodePointRange& r, char32_t c) { return r.last < c; });
  return it != end && it->first <= cp;
}

// One character of UTF-8 at the start of `text`: its code point and length
// in bytes. What starts no valid sequence (RFC 3629; table 3-7 of the
// Unicode Standard) is one U+FFFD per maximal subpart, as Python's
// decode(errors="replace") and terminals count it: a lead byte with the
// continuation bytes that fit it so far, else a single byte.
struct Decoded {
  char32_t cp;
  std::size_t length;
  bool valid;
};

Decoded decode(std::string_view text) noexcept {
  const auto b0 = static_cast<unsigned char>(text[0]);
  if (b0 < 0x80) return {b0, 1, true};
  std::size_t length = 0;
  unsigned low = 0x80;  // the range of the second byte
  unsigned high = 0xBF;
  char32_t cp = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
    cp = b0 & 0x1Fu;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    cp = b0 & 0x0Fu;
    if (b0 == 0xE0) low = 0xA0;   // no overlong forms
    if (b0 == 0xED) high = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    cp = b0 & 0x07u;
    if (b0 == 0xF0) low = 0x90;
    if (b0 == 0xF4) high = 0x8F;  // nothing above U+10FFFF
  } else {
    return {0xFFFD, 1, false};
  }
  for (std::size_t i = 1; i < length; ++i) {
    if (i >= text.size()) return {0xFFFD, i, false};
    const unsigned b = static_cast<unsigned char>(text[i]);
    if (b < (i == 1 ? low : 0x80u) || b > (i == 1 ? high : 0xBFu)) return {0xFFFD, i, false};
    cp = (cp << 6) | (b & 0x3Fu);
  }
  return {cp, length, true};
}

// Columns of one decoded character inside text: control characters 0.
std::size_t columns_of(const Decoded& d) noexcept {
  return static_cast<std::size_t>(std::max(codepoint_width(d.cp), 0));
}

}  // namespace

int codepoint_width(char32_t cp) noexcept {
  if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0)) return -1;
  if (cp < 0x300) return 1;  // below the combining marks nothing is wide or zero-width (U+00AD is drawn)
  if (in(std::begin(zero_width_ranges), std::end(zero_width_ranges), cp)) return 0;
  if (in(std::begin(wide_ranges), std::end(wide_ranges), cp)) return 2;
  return 1;
}

std::size_t display_width(std::string_view text) noexcept {
  std::size_t columns = 0;
  while (!text.empty()) {
    const Decoded d = decode(text);
    columns += columns_of(d);
    text.remove_prefix(d.length);
  }
  return columns;
}

std::size_t fit_width(std::string_view text, std::size_t columns) noexcept {
  std::size_t used = 0;
  std::size_t end = 0;
  while (end < text.size()) {
    const Decoded d = decode(text.substr(end));
    const std::size_t width = columns_of(d);
    if (used + width > columns) break;
    used += width;
    end += d.length;
  }
  return end;
}

std::string drawable_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    if (text.front() == '\x1b') {
      text.remove_prefix(1);
      if (!text.empty() && text.front() == '[') {  // CSI: parameters, intermediates, one final byte
        std::size_t i = 1;
        while (i < text.size() && !(text[i] >= '@' && text[i] <= '~')) ++i;
        text.remove_prefix(std::min(i + 1, text.size()));
      } else if (!text.empty() && text.front() == ']') {  // OSC: up to BEL or ESC backslash
        std::size_t i = 1;
        while (i < text.size() && text[i] != '\a' && text[i] != '\x1b') ++i;
        if (i < text.size() && text[i] == '\a') {
          ++i;
        } else if (i + 1 < text.size() && text[i + 1] == '\\') {
          i += 2;
        }  // else an ESC that starts the next sequence, or the end
        text.remove_prefix(i);
      } else if (!text.empty()) {  // ESC and one more byte
        text.remove_prefix(1);
      }
      continue;
    }
    const Decoded d = decode(text);
    if (!d.valid) {
      out += "\xEF\xBF\xBD";  // U+FFFD
    } else if (codepoint_width(d.cp) >= 0) {
      out.append(text.substr(0, d.length));
    }
    text.remove_prefix(d.length);
  }
  return out;
}

}  // namespace davincirun
