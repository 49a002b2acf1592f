#pragma once
// UTF-8 handling and the code point classes the pre-tokenizers match on (\p{L}, \p{N}, \s).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ts::unicode {

enum : uint8_t {
  kLetter = 1,   // \p{L} as HF tokenizers' regex engine (Oniguruma) sees it
  kNumber = 2,   // \p{N}, same engine
  kSpace = 4,    // \s, same engine
  kNumeric = 8,  // Rust char::is_numeric, used by HF's Digits pre-tokenizer
};

struct CodepointRun {
  uint32_t first;
  uint8_t flags;
};
extern const CodepointRun kCodepointRuns[];
extern const size_t kCodepointRunCount;

// Class flags of a code point; kInvalid (a byte that is not valid UTF-8) has none.
uint8_t flags(uint32_t cp);

inline constexpr uint32_t kInvalid = 0xFFFFFFFF;

struct Utf8Char {
  uint32_t cp;   // kInvalid for a byte that does not start a well-formed sequence
  uint32_t len;  // bytes consumed: 1..4, and 1 for an invalid byte
};

// Decodes the character at `pos` (< s.size()) strictly: overlong forms, surrogates and values
// above U+10FFFF are invalid, so every byte string splits into characters and single bad bytes.
Utf8Char decode(std::string_view s, size_t pos);

void append_utf8(std::string& out, uint32_t cp);

// Length of the tail of `s` that is a proper prefix of a well-formed sequence (0..3): the bytes
// a streaming decoder must hold back until the next token.
size_t incomplete_tail(std::string_view s);

// `s` with every invalid byte replaced by U+FFFD.
std::string sanitize(std::string_view s);

}  // namespace ts::unicode
