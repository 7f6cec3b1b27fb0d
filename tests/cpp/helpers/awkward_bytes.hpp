// Strings no text encoding would carry, for the protocol tests: a payload
// must round-trip them byte for byte.
#pragma once

#include <string>

#include "pattern.hpp"

namespace davincirun_test {

inline const std::string with_nul("a\0b\0", 4);
inline const std::string bad_utf8 = "\xff\xfe\xc3\x28 \xed\xa0\x80 \x80";
inline const std::string newlines = "line 1\nline 2\r\n\n";
inline const std::string all_bytes = pattern_bytes(300);

}  // namespace davincirun_test
