#pragma once
// The tokenizer.ggml.* metadata of a GGUF, read and validated once, so tokenizers (and tests)
// can be built from plain data.
#include <cstdint>
#include <string>
#include <vector>

#include "model/tokenizer.h"

namespace ts {

struct TokenizerData {
  std::string name;   // file name, for error messages
  std::string model;  // tokenizer.ggml.model
  std::string pre;    // tokenizer.ggml.pre ("" when absent)
  std::vector<std::string> tokens;
  std::vector<float> scores;        // empty when absent
  std::vector<TokenAttr> attrs;     // all Normal when tokenizer.ggml.token_type is absent
  std::vector<std::string> merges;  // "left right", best first
  int32_t bos = -1, eos = -1, unk = -1, eot = -1, eom = -1;  // -1: none
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = true;
};

// Throws ts::Error naming the file and the missing or invalid key.
TokenizerData read_tokenizer_data(const GgufFile& gguf);

}  // namespace ts
