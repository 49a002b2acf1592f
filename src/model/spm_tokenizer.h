#pragma once
// tokenizer.ggml.model "llama": SentencePiece BPE. Spaces become U+2581 ("▁"), a "▁" is prefixed
// when add_space_prefix is set, and adjacent pieces merge greedily by the score of the merged
// piece (highest first, leftmost on ties); characters outside the vocabulary fall back to
// <0xXX> byte tokens.
//
// Decoding maps "▁" back to a space and byte tokens to their byte. decode() of a whole sequence
// then drops one leading space when add_space_prefix is set, as HF's Llama decoder (Strip) does,
// so decode(encode(text)) == text; token_to_bytes() and StreamingDecoder keep it, since streamed
// tokens continue a prompt.
#include <array>

#include "model/tokenizer_vocab.h"

namespace ts {

class SpmTokenizer final : public VocabTokenizer {
 public:
  explicit SpmTokenizer(TokenizerData& data);

 protected:
  void encode_text(std::string_view text, std::vector<int32_t>& out) const override;

 private:
  void append_bytes(std::string_view bytes, std::vector<int32_t>& out) const;

  std::vector<float> scores_;
  std::array<int32_t, 256> byte_ids_;  // <0xXX> token of each byte, -1 if absent
  bool add_space_prefix_ = true;
};

}  // namespace ts
