#pragma once
// What both tokenizer models share: the vocabulary, special-token splitting, BOS, and decoding
// through per-token byte strings. Subclasses tokenize text that holds no special tokens.
#include <string>
#include <vector>

#include "model/tokenizer.h"
#include "model/tokenizer_data.h"
#include "model/tokenizer_special.h"

namespace ts {

class VocabTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const final;
  std::string token_to_bytes(int32_t id, bool render_special = false) const final;

 protected:
  explicit VocabTokenizer(TokenizerData& data);  // takes the token texts
  // Appends the ids of `text`, a non-empty run of input between special tokens.
  virtual void encode_text(std::string_view text, std::vector<int32_t>& out) const = 0;

  int32_t unk_ = -1;
  // Bytes each token decodes to; subclasses fill it. Control/unknown/unused tokens are rendered
  // from their text only on request.
  std::vector<std::string> pieces_;

 private:
  SpecialMatcher specials_;
};

}  // namespace ts
