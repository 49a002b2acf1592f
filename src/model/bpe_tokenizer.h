#pragma once
// tokenizer.ggml.model "gpt2": byte-level BPE. Text is split by the pre-tokenizer named in
// tokenizer.ggml.pre, each piece's bytes are spelled in GPT-2's byte-to-unicode alphabet, and
// adjacent symbols merge by merge rank (lowest first, leftmost on ties), exactly as HF
// tokenizers' BPE model does. Decoding undoes the byte alphabet.
#include <array>
#include <unordered_map>

#include "model/pretokenizer.h"
#include "model/tokenizer_vocab.h"

namespace ts {

class BpeTokenizer final : public VocabTokenizer {
 public:
  BpeTokenizer(TokenizerData& data, PreTokenizer pre);

 protected:
  void encode_text(std::string_view text, std::vector<int32_t>& out) const override;

 private:
  struct Merge {
    int32_t rank, id;
  };
  static uint64_t pair_key(int32_t l, int32_t r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
  }
  const Merge* find_merge(int32_t l, int32_t r) const;
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  PreTokenizer pre_kind_;
  // Llama 3 vocabularies look a whole piece up before merging (HF BPE ignore_merges).
  bool ignore_merges_ = false;
  std::array<int32_t, 256> byte_ids_;  // token spelling each single byte, -1 if absent
  std::unordered_map<uint64_t, Merge> merges_;
};

}  // namespace ts
