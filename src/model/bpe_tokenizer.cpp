#include "model/bpe_tokenizer.h"

#include <queue>

#include "core/error.h"
#include "model/unicode.h"

namespace ts {
namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 bytes
// for U+0100.. in byte order, so every byte has a visible, whitespace-free spelling.
struct ByteAlphabet {
  std::array<uint32_t, 256> cp{};
  std::array<int16_t, 324> byte{};  // inverse, -1 for code points outside the alphabet

  ByteAlphabet() {
    byte.fill(-1);
    uint32_t extra = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      cp[b] = printable ? b : extra++;
      byte[cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

std::string spell(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) unicode::append_utf8(out, alphabet().cp[static_cast<uint8_t>(c)]);
  return out;
}

// A token's bytes, as HF's ByteLevel decoder gives them: the alphabet undone, or the text as is
// when it has a character outside the alphabet.
std::string unspell(const std::string& text) {
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    const unicode::Utf8Char ch = unicode::decode(text, pos);
    if (ch.cp >= alphabet().byte.size() || alphabet().byte[ch.cp] < 0) return text;
    out += static_cast<char>(alphabet().byte[ch.cp]);
    pos += ch.len;
  }
  return out;
}

struct Symbol {
  int32_t id;
  int32_t prev, next;
  bool alive;
};

struct QueuedMerge {
  int32_t rank;
  int32_t pos;  // left symbol
  int32_t id;   // expected result, to recognise entries made stale by other merges
  bool operator<(const QueuedMerge& o) const {  // priority_queue pops the largest
    return rank != o.rank ? rank > o.rank : pos > o.pos;
  }
};

}  // namespace

BpeTokenizer::BpeTokenizer(TokenizerData& d, PreTokenizer pre) : VocabTokenizer(d), pre_kind_(pre) {
  TS_CHECK(!d.merges.empty(), d.name, ": missing metadata key tokenizer.ggml.merges");
  ignore_merges_ = pre == PreTokenizer::Llama3;

  byte_ids_.fill(-1);
  for (uint32_t b = 0; b < 256; ++b) byte_ids_[b] = find(spell(std::string(1, static_cast<char>(b))));

  merges_.reserve(d.merges.size());
  for (size_t rank = 0; rank < d.merges.size(); ++rank) {
    const std::string& m = d.merges[rank];
    const size_t space = m.find(' ', 1);
    TS_CHECK(space != std::string::npos, d.name, ": tokenizer.ggml.merges[", rank, "] = \"", m,
             "\" is not two tokens separated by a space");
    const std::string_view left = std::string_view(m).substr(0, space);
    const std::string_view right = std::string_view(m).substr(space + 1);
    const int32_t l = find(left), r = find(right), id = find(std::string(left) + std::string(right));
    // A merge naming tokens the vocabulary lacks can never apply.
    if (l < 0 || r < 0 || id < 0) continue;
    merges_.insert_or_assign(pair_key(l, r), Merge{static_cast<int32_t>(rank), id});
  }

  pieces_.resize(texts_.size());
  for (size_t i = 0; i < texts_.size(); ++i) pieces_[i] = unspell(texts_[i]);
}

const BpeTokenizer::Merge* BpeTokenizer::find_merge(int32_t l, int32_t r) const {
  auto it = merges_.find(pair_key(l, r));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeTokenizer::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  for (std::string_view word : pre_tokenize(pre_kind_, text)) encode_word(word, out);
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    if (const int32_t id = find(spell(word)); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  for (char c : word) {
    const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
    // A byte the vocabulary cannot spell is dropped, as HF (BPE without unk) and llama.cpp do.
    if (id < 0) continue;
    const auto n = static_cast<int32_t>(sym.size());
    sym.push_back({id, n - 1, n + 1, true});
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  // HF tokenizers' Word::merge_all, step for step, so ties and stale entries resolve the same.
  std::priority_queue<QueuedMerge> queue;
  for (size_t i = 0; i + 1 < sym.size(); ++i) {
    if (const Merge* m = find_merge(sym[i].id, sym[i + 1].id)) {
      queue.push({m->rank, static_cast<int32_t>(i), m->id});
    }
  }
  while (!queue.empty()) {
    const QueuedMerge top = queue.top();
    queue.pop();
    Symbol& a = sym[static_cast<size_t>(top.pos)];
    if (!a.alive || a.next < 0) continue;
    Symbol& b = sym[static_cast<size_t>(a.next)];
    const Merge* m = find_merge(a.id, b.id);
    if (!m || m->id != top.id) continue;
    a.id = top.id;
    b.alive = false;
    a.next = b.next;
    if (a.next >= 0) sym[static_cast<size_t>(a.next)].prev = top.pos;
    if (a.prev >= 0) {
      if (const Merge* pm = find_merge(sym[static_cast<size_t>(a.prev)].id, a.id)) {
        queue.push({pm->rank, a.prev, pm->id});
      }
    }
    if (a.next >= 0) {
      if (const Merge* nm = find_merge(a.id, sym[static_cast<size_t>(a.next)].id)) {
        queue.push({nm->rank, top.pos, nm->id});
      }
    }
  }
  for (int32_t i = 0; i >= 0; i = sym[static_cast<size_t>(i)].next)
    out.push_back(sym[static_cast<size_t>(i)].id);
}

}  // namespace ts
