#pragma once
// Log-probabilities of tokens under the model: the primitive every perplexity protocol and every
// log-likelihood task is built from.
#include <cstdint>
#include <functional>
#include <span>

#include "runtime/transformer.h"

namespace ts {

struct TokenScore {
  double log_prob;  // log p(target) under softmax(logits), computed stably in double precision
  bool greedy;      // target is the arg-max (the first one among ties, as torch.argmax)
};
TokenScore token_score(const float* logits, size_t n_vocab, int32_t target);
inline double token_log_prob(const float* logits, size_t n_vocab, int32_t target) {
  return token_score(logits, n_vocab, target).log_prob;
}

// For each i in [first_target, tokens.size()), calls on_score(score of tokens[i] given tokens[0..i)).
// The KV cache is first truncated to `keep` positions, which must already hold tokens[0..keep)
// (keep < first_target < tokens.size()); the rest is fed as one call, with logits only where
// targets are predicted. Afterwards the cache holds every token but the last.
void score_tokens(Transformer& tf, std::span<const int32_t> tokens, size_t keep, size_t first_target,
                  const std::function<void(const TokenScore&)>& on_score);

}  // namespace ts
