#include "model/pretokenizer.h"

#include <algorithm>
#include <cstdint>

#include "model/unicode.h"

namespace ts {
namespace {

namespace u = unicode;

struct Char {
  uint32_t cp;
  uint32_t offset;  // byte offset in the text
  uint8_t flags;
};

bool is_letter(const Char& c) { return c.flags & u::kLetter; }
bool is_number(const Char& c) { return c.flags & u::kNumber; }
bool is_space(const Char& c) { return c.flags & u::kSpace; }
bool is_other(const Char& c) { return !(c.flags & (u::kLetter | u::kNumber | u::kSpace)); }
bool is_newline(const Char& c) { return c.cp == '\r' || c.cp == '\n'; }

// Regex semantics over chars [begin, end): alternatives are tried in order and the first that
// matches at the current position wins, with greedy quantifiers and backtracking worked out per
// alternative by hand.
class Matcher {
 public:
  Matcher(const std::vector<Char>& chars, size_t end) : c_(chars), end_(end) {}

  size_t gpt2(size_t i) const {
    if (size_t e = contraction(i, false)) return e;
    const size_t start = optional_space(i);
    if (start < end_) {
      if (is_letter(c_[start])) return run(start, is_letter);
      if (is_number(c_[start])) return run(start, is_number);
      if (is_other(c_[start])) return run(start, is_other);
    }
    return whitespace(i);
  }

  size_t llama3(size_t i, size_t max_digits) const {
    if (size_t e = contraction(i, true)) return e;
    if (!is_newline(c_[i]) && !is_letter(c_[i]) && !is_number(c_[i]) && i + 1 < end_ &&
        is_letter(c_[i + 1])) {
      return run(i + 1, is_letter);
    }
    if (is_letter(c_[i])) return run(i, is_letter);
    if (is_number(c_[i])) return std::min(run(i, is_number), i + max_digits);
    const size_t start = optional_space(i);
    if (start < end_ && is_other(c_[start])) return run(run(start, is_other), is_newline);
    // \s*[\r\n]+ : backtracking leaves the match ending just after the run's last newline.
    const size_t ws_end = run(i, is_space);
    for (size_t k = ws_end; k > i; --k) {
      if (is_newline(c_[k - 1])) return k;
    }
    return whitespace(i);
  }

 private:
  template <typename Pred>
  size_t run(size_t i, Pred pred) const {
    while (i < end_ && pred(c_[i])) ++i;
    return i;
  }

  // " ?X+": the literal space is taken only when a char of class X follows, which callers check.
  size_t optional_space(size_t i) const { return c_[i].cp == ' ' ? i + 1 : i; }

  // \s+(?!\S)|\s+ at a whitespace char: a run followed by non-space gives its last char back
  // (to lead the next piece) unless the run is a single char.
  size_t whitespace(size_t i) const {
    const size_t e = run(i, is_space);
    if (e < end_ && e - i > 1) return e - 1;
    return e;
  }

  // 's|'t|'re|'ve|'m|'ll|'d, ASCII-case-insensitive (plus U+017F, which folds to 's') if asked.
  size_t contraction(size_t i, bool ignore_case) const {
    if (c_[i].cp != '\'' || i + 1 >= end_) return 0;
    auto lower = [&](size_t k) -> uint32_t {
      uint32_t cp = c_[k].cp;
      if (!ignore_case) return cp;
      if (cp == 0x17F) return 's';
      return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    };
    const uint32_t a = lower(i + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if (i + 2 >= end_) return 0;
    const uint32_t b = lower(i + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return 0;
  }

  const std::vector<Char>& c_;
  size_t end_;
};

std::vector<Char> decode_chars(std::string_view text) {
  std::vector<Char> chars;
  chars.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const u::Utf8Char ch = u::decode(text, pos);
    chars.push_back({ch.cp, static_cast<uint32_t>(pos), u::flags(ch.cp)});
    pos += ch.len;
  }
  chars.push_back({0, static_cast<uint32_t>(text.size()), 0});  // sentinel: end offset
  return chars;
}

}  // namespace

std::optional<PreTokenizer> pre_tokenizer_from_name(std::string_view name) {
  if (name.empty() || name == "default" || name == "gpt2") return PreTokenizer::Gpt2;
  if (name == "smollm") return PreTokenizer::SmolLM;
  if (name == "llama3" || name == "llama-v3" || name == "llama-bpe") return PreTokenizer::Llama3;
  if (name == "qwen2" || name == "deepseek-r1-qwen") return PreTokenizer::Qwen2;
  return std::nullopt;
}

std::vector<std::string_view> pre_tokenize(PreTokenizer kind, std::string_view text) {
  const std::vector<Char> chars = decode_chars(text);
  const size_t n = chars.size() - 1;
  std::vector<std::string_view> pieces;
  auto emit = [&](size_t a, size_t b) {
    pieces.push_back(text.substr(chars[a].offset, chars[b].offset - chars[a].offset));
  };
  // Applies one regex kind to chars [a, b), which act as a whole text (lookahead stops at b).
  auto split = [&](size_t a, size_t b) {
    const Matcher m(chars, b);
    for (size_t i = a; i < b;) {
      size_t e = 0;
      switch (kind) {
        case PreTokenizer::Gpt2:
        case PreTokenizer::SmolLM:
          e = m.gpt2(i);
          break;
        case PreTokenizer::Llama3:
          e = m.llama3(i, 3);
          break;
        case PreTokenizer::Qwen2:
          e = m.llama3(i, 1);
          break;
      }
      emit(i, e);
      i = e;
    }
  };
  if (kind != PreTokenizer::SmolLM) {
    split(0, n);
    return pieces;
  }
  size_t start = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!(chars[i].flags & u::kNumeric)) continue;
    split(start, i);
    emit(i, i + 1);
    start = i + 1;
  }
  split(start, n);
  return pieces;
}

}  // namespace ts
