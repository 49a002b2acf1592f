// UTF-8 decoding, tail detection and the generated code point classes.
#include <gtest/gtest.h>

#include "model/unicode.h"

namespace ts::unicode {
namespace {

TEST(TokenizerUnicode, DecodesWellFormedSequences) {
  const std::string s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";  // a é € 😀
  EXPECT_EQ(decode(s, 0).cp, 'a');
  EXPECT_EQ(decode(s, 1).cp, 0xE9u);
  EXPECT_EQ(decode(s, 1).len, 2u);
  EXPECT_EQ(decode(s, 3).cp, 0x20ACu);
  EXPECT_EQ(decode(s, 6).cp, 0x1F600u);
  EXPECT_EQ(decode(s, 6).len, 4u);
}

TEST(TokenizerUnicode, RejectsIllFormedSequencesOneByteAtATime) {
  for (const std::string bad : {"\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80",
                                "\xF5\x80\x80\x80", "\x80", "\xE2\x82", "\xE2(\xAC"}) {
    const Utf8Char ch = decode(bad, 0);
    EXPECT_EQ(ch.cp, kInvalid) << bad;
    EXPECT_EQ(ch.len, 1u) << bad;
  }
}

TEST(TokenizerUnicode, FindsIncompleteTails) {
  EXPECT_EQ(incomplete_tail(""), 0u);
  EXPECT_EQ(incomplete_tail("abc"), 0u);
  EXPECT_EQ(incomplete_tail("a\xE2\x82"), 2u);
  EXPECT_EQ(incomplete_tail("a\xE2"), 1u);
  EXPECT_EQ(incomplete_tail("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(incomplete_tail("\xE2\x82\xAC"), 0u);  // complete
  EXPECT_EQ(incomplete_tail("\xED\xA0"), 0u);      // would be a surrogate: never completes
  EXPECT_EQ(incomplete_tail("\x80\x80"), 0u);      // stray continuations
}

TEST(TokenizerUnicode, SanitizeReplacesEachBadByte) {
  EXPECT_EQ(sanitize("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(sanitize("a\xFF"
                     "b\xE2\x82"),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(TokenizerUnicode, AppendUtf8RoundTrips) {
  for (uint32_t cp : {0x24u, 0xA2u, 0x939u, 0x20ACu, 0xD55Cu, 0x10348u, 0x10FFFFu}) {
    std::string s;
    append_utf8(s, cp);
    EXPECT_EQ(decode(s, 0).cp, cp);
    EXPECT_EQ(decode(s, 0).len, s.size());
  }
}

TEST(TokenizerUnicode, ClassesFollowHfTokenizers) {
  EXPECT_EQ(flags('a'), kLetter);
  EXPECT_EQ(flags('7'), kNumber | kNumeric);
  EXPECT_EQ(flags(' '), kSpace);
  EXPECT_EQ(flags('\v'), kSpace);
  EXPECT_EQ(flags(0x1C), 0);         // a separator control: Python's isspace() says yes, \s says no
  EXPECT_EQ(flags(0x3000), kSpace);  // ideographic space
  EXPECT_EQ(flags(0xB2), kNumber | kNumeric);
  EXPECT_EQ(flags(0x4E2D), kLetter);
  EXPECT_EQ(flags(0x301), 0);           // combining acute: \p{M}, not a letter
  EXPECT_EQ(flags(0x1C89), kLetter);    // Unicode 16.0, newer than Python's unicodedata here
  EXPECT_EQ(flags(0x11DE0), kNumeric);  // a digit to Rust (Digits) but not yet to Oniguruma
  EXPECT_EQ(flags(kInvalid), 0);
}

}  // namespace
}  // namespace ts::unicode
