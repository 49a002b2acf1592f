#include "model/spm_tokenizer.h"

#include <queue>

#include "core/error.h"
#include "model/unicode.h"

namespace ts {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581

struct Symbol {
  uint32_t start, len;  // bytes of the normalized text; len 0 once merged into its left neighbour
  int32_t prev, next;
  int32_t id;  // -1: a character outside the vocabulary
};

struct Bigram {
  float score;
  uint32_t left, right, len;
  int32_t id;
  bool operator<(const Bigram& o) const {  // priority_queue pops the largest
    return score < o.score || (score == o.score && left > o.left);
  }
};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The byte a "<0xXX>" token stands for, or -1.
int parse_byte_token(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  const int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

SpmTokenizer::SpmTokenizer(TokenizerData& d) : VocabTokenizer(d) {
  TS_CHECK(!d.scores.empty(), d.name, ": missing metadata key tokenizer.ggml.scores");
  scores_ = std::move(d.scores);
  add_space_prefix_ = d.add_space_prefix;
  strip_leading_space_ = d.add_space_prefix;

  byte_ids_.fill(-1);
  pieces_.resize(texts_.size());
  for (size_t i = 0; i < texts_.size(); ++i) {
    const std::string& t = texts_[i];
    const int byte = parse_byte_token(t);
    if (byte >= 0) byte_ids_[static_cast<size_t>(byte)] = static_cast<int32_t>(i);
    if (attrs_[i] == TokenAttr::Byte && byte >= 0) {
      pieces_[i] = std::string(1, static_cast<char>(byte));
      continue;
    }
    for (size_t pos = 0; pos < t.size();) {
      if (t.compare(pos, kSpaceMark.size(), kSpaceMark) == 0) {
        pieces_[i] += ' ';
        pos += kSpaceMark.size();
      } else {
        pieces_[i] += t[pos++];
      }
    }
  }
}

void SpmTokenizer::append_bytes(std::string_view bytes, std::vector<int32_t>& out) const {
  // Like HF's byte fallback: all bytes as byte tokens if the vocabulary has them, else one unknown.
  for (char c : bytes) {
    if (byte_ids_[static_cast<uint8_t>(c)] < 0) {
      if (unk_ >= 0) out.push_back(unk_);
      return;
    }
  }
  for (char c : bytes) out.push_back(byte_ids_[static_cast<uint8_t>(c)]);
}

void SpmTokenizer::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  std::string norm;
  norm.reserve(text.size() + text.size() / 4 + 3);
  if (add_space_prefix_) norm += kSpaceMark;
  for (char c : text) {
    if (c == ' ') {
      norm += kSpaceMark;
    } else {
      norm += c;
    }
  }
  const std::string_view s = norm;

  std::vector<Symbol> sym;
  sym.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const uint32_t len = unicode::decode(s, pos).len;
    const int32_t n = static_cast<int32_t>(sym.size());
    sym.push_back({static_cast<uint32_t>(pos), len, n - 1, n + 1, find(s.substr(pos, len))});
    pos += len;
  }
  sym.back().next = -1;

  std::priority_queue<Bigram> queue;
  auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const Symbol& a = sym[static_cast<size_t>(l)];
    const Symbol& b = sym[static_cast<size_t>(r)];
    // Only pieces of the vocabulary merge: an out-of-vocabulary character stays alone.
    if (a.id < 0 || b.id < 0) return;
    const int32_t id = find(s.substr(a.start, a.len + b.len));
    if (id < 0) return;
    queue.push({scores_[static_cast<size_t>(id)], static_cast<uint32_t>(l), static_cast<uint32_t>(r),
                a.len + b.len, id});
  };
  for (size_t i = 1; i < sym.size(); ++i) try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Symbol& a = sym[bg.left];
    Symbol& b = sym[bg.right];
    if (a.len == 0 || b.len == 0 || a.len + b.len != bg.len) continue;  // stale: a side changed
    a.len += b.len;
    a.id = bg.id;
    a.next = b.next;
    if (b.next >= 0) sym[static_cast<size_t>(b.next)].prev = static_cast<int32_t>(bg.left);
    b.len = 0;
    try_add(a.prev, static_cast<int32_t>(bg.left));
    try_add(static_cast<int32_t>(bg.left), a.next);
  }

  for (int32_t i = 0; i >= 0; i = sym[static_cast<size_t>(i)].next) {
    const Symbol& x = sym[static_cast<size_t>(i)];
    if (x.id >= 0) {
      out.push_back(x.id);
    } else {
      append_bytes(s.substr(x.start, x.len), out);
    }
  }
}

}  // namespace ts
