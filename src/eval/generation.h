#pragma once
// Greedy decoding and teacher-forced argmax checks: the two ways the long-context and synthetic
// tasks read answers out of the model.
#include <cstdint>
#include <span>
#include <vector>

#include "eval/loglikelihood.h"
#include "model/tokenizer.h"
#include "runtime/transformer.h"

namespace ts {

struct GenerationLimits {
  size_t max_new_tokens = 0;
  // Stop at the first newline that follows non-blank output (short-answer tasks: the answer is
  // the first line, and decoding on only costs time).
  bool stop_at_newline = false;
};

// Greedy (argmax) continuation of `prompt`, which is fed as one call from an empty cache; stops at
// an end-of-generation token (not returned), after max_new_tokens, or when the cache is full.
std::vector<int32_t> greedy_generate(Transformer& tf, const Tokenizer& tok, std::span<const int32_t> prompt,
                                     const GenerationLimits& limits);

// For each continuation token, whether it is the argmax of the model's prediction at its position
// given everything before it (context and the true earlier continuation tokens), from an empty cache.
std::vector<bool> argmax_hits(Transformer& tf, const TokenizedPair& pair);

}  // namespace ts
