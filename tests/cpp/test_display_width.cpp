// Display columns of text on a terminal: what the status line is fitted to.
#include <catch2/catch.hpp>

#include <string>

#include "davincirun/display_width.hpp"

using namespace davincirun;

TEST_CASE("codepoint_width: wide, zero-width, control and ambiguous characters", "[display_width]") {
  CHECK(codepoint_width(U'A') == 1);
  CHECK(codepoint_width(U'\u4E2D') == 2);      // 中, CJK ideograph
  CHECK(codepoint_width(U'\u3042') == 2);      // あ, hiragana
  CHECK(codepoint_width(U'\uAC00') == 2);      // 가, Hangul syllable
  CHECK(codepoint_width(U'\uFF21') == 2);      // Ａ, fullwidth
  CHECK(codepoint_width(U'\U0001F600') == 2);  // an emoji with emoji presentation
  CHECK(codepoint_width(U'\U0003FFFD') == 2);  // unassigned, in a block that defaults to wide
  CHECK(codepoint_width(U'\u0301') == 0);      // combining acute accent
  CHECK(codepoint_width(U'\u200B') == 0);      // zero width space
  CHECK(codepoint_width(U'\u1160') == 0);      // Hangul jungseong filler
  CHECK(codepoint_width(U'\u00AD') == 1);      // soft hyphen: drawn
  CHECK(codepoint_width(U'\u2588') == 1);      // █, East Asian Ambiguous: one column
  CHECK(codepoint_width(U'\u00E9') == 1);
  CHECK(codepoint_width(0x1B) == -1);
  CHECK(codepoint_width(0x7F) == -1);
  CHECK(codepoint_width(0x9B) == -1);  // C1 CSI
}

TEST_CASE("display_width counts columns, not bytes or characters", "[display_width]") {
  CHECK(display_width("") == 0);
  CHECK(display_width("epoch 1") == 7);
  CHECK(display_width("\xe8\xae\xad\xe7\xbb\x83 50%") == 8);  // "训练 50%"
  CHECK(display_width("e\xcc\x81") == 1);                     // e + combining acute
  CHECK(display_width("a\tb") == 2);                          // control characters take no column
}

TEST_CASE("display_width counts invalid UTF-8 as terminals draw it, one U+FFFD per maximal subpart",
          "[display_width]") {
  CHECK(display_width("\xff") == 1);
  CHECK(display_width("\xe4\xb8") == 1);          // a 3-byte sequence cut short
  CHECK(display_width("\xe4\xb8x") == 2);         // ... followed by a character
  CHECK(display_width("\xc0\x80") == 2);          // an overlong NUL: two bytes no sequence starts with
  CHECK(display_width("\xed\xa0\x80") == 3);      // a surrogate: none of its bytes is valid here
  CHECK(display_width("\xf4\x90\x80\x80") == 4);  // above U+10FFFF
}

TEST_CASE("fit_width cuts at a character boundary by columns, keeping combining marks", "[display_width]") {
  const std::string chinese =
      "\xe4\xb8\xad\xe6\x96\x87"
      "ab";  // "中文ab"
  CHECK(fit_width(chinese, 0) == 0);
  CHECK(fit_width(chinese, 1) == 0);  // 中 needs two
  CHECK(fit_width(chinese, 2) == 3);
  CHECK(fit_width(chinese, 3) == 3);
  CHECK(fit_width(chinese, 4) == 6);
  CHECK(fit_width(chinese, 6) == chinese.size());
  CHECK(fit_width(chinese, 100) == chinese.size());
  CHECK(fit_width("e\xcc\x81xyz", 1) == 3);  // the accent stays with its letter
  CHECK(fit_width("ab\xe4\xb8", 3) == 4);    // the broken sequence is one column
}

TEST_CASE("drawable_text keeps what a terminal draws", "[display_width]") {
  CHECK(drawable_text("\x1b[31m\xe7\xba\xa2\x1b[0m ok") == "\xe7\xba\xa2 ok");  // colours go, 红 stays
  CHECK(drawable_text("a\rb\x07\tc\x7f") == "abc");
  CHECK(drawable_text("\x1b]0;title\x07x\x1b]2;t\x1b\\y") == "xy");  // OSC ended by BEL or ST
  CHECK(drawable_text("\x1b"
                      "7z") == "z");  // ESC and one byte
  CHECK(drawable_text("\xc2\x9b"
                      "1m") == "1m");  // C1 CSI is a control character
  CHECK(drawable_text("a\xff"
                      "b\xe4\xb8") ==
        "a\xef\xbf\xbd"
        "b\xef\xbf\xbd");
  CHECK(drawable_text("\x1b[") == "");  // a sequence cut short
}
