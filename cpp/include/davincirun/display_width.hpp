// How many columns text takes on a terminal: what the status line at the
// bottom of a terminal console is fitted to (console_sink.hpp).
//
// The widths are those of wcwidth(3) in a UTF-8 locale, computed here
// because the job supervisor runs in the "C" locale, where glibc's wcwidth()
// is -1 for every non-ASCII character. Source: the Unicode Character
// Database 14.0.0 (East_Asian_Width, UAX #11, and General_Category), turned
// into ranges by scripts/display_width_table.py.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace davincirun {

/// Columns a terminal gives code point `cp`: 2 for East Asian Wide and
/// Fullwidth characters (CJK ideographs, kana, Hangul syllables, fullwidth
/// forms, most emoji); 0 for nonspacing and enclosing marks, format
/// characters (zero width space, joiners; not the soft hyphen) and Hangul
/// medial vowels and final consonants; -1 for control characters (U+0000
/// to U+001F, U+007F to U+009F), which a terminal does not draw but acts
/// on; 1 for everything else, East Asian Ambiguous characters (the block
/// elements of progress bars) included.
int codepoint_width(char32_t cp) noexcept;

/// Columns UTF-8 `text` takes: the sum of codepoint_width() over its
/// characters, control characters counting 0. What is not valid UTF-8
/// (RFC 3629: no overlong forms, surrogates or values above U+10FFFF)
/// counts 1 per maximal subpart (a lead byte and the continuation bytes
/// that fit it, else one byte), which a terminal draws as one U+FFFD.
std::size_t display_width(std::string_view text) noexcept;

/// The length in bytes of the longest start of UTF-8 `text` that takes at
/// most `columns` columns (display_width()). Never ends inside a UTF-8
/// sequence, and keeps the zero-width characters that follow the last
/// character that fits (a combining accent stays with its letter).
std::size_t fit_width(std::string_view text, std::size_t columns) noexcept;

/// What a terminal draws of `text`, as text whose display_width() is the
/// columns it takes there: escape sequences (CSI such as colours, OSC such
/// as titles, ESC and one byte) and control characters (C0, DEL, C1)
/// removed, and each maximal subpart of invalid UTF-8 replaced by U+FFFD.
std::string drawable_text(std::string_view text);

}  // namespace davincirun
