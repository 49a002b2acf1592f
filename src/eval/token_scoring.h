#pragma once
// Log-probabilities of tokens under the model: the primitive every perplexity protocol and every
// log-likelihood task is built from.
#include <cstdint>
#include <functional>
#include <span>

#include "runtime/transformer.h"

namespace ts {

// log p(target) under softmax(logits), computed stably in double precision.
double token_log_prob(const float* logits, size_t n_vocab, int32_t target);

// For each i in [first_target, tokens.size()), calls on_log_prob(log p(tokens[i] | tokens[0..i))).
// The KV cache is first truncated to `keep` positions, which must already hold tokens[0..keep)
// (keep < first_target < tokens.size()); the rest is fed as one call, with logits only where
// targets are predicted. Afterwards the cache holds every token but the last.
void score_tokens(Transformer& tf, std::span<const int32_t> tokens, size_t keep, size_t first_target,
                  const std::function<void(double)>& on_log_prob);

}  // namespace ts
