#pragma once
// Log-likelihood of a continuation given a context, tokenized and scored as lm-evaluation-harness
// does for Hugging Face causal models.
#include <cstdint>
#include <string_view>
#include <vector>

#include "model/tokenizer.h"
#include "runtime/transformer.h"

namespace ts {

struct TokenizedPair {
  std::vector<int32_t> context, continuation;
};

// lm-eval's _encode_pair: trailing whitespace of the context moves to the continuation; the
// continuation's tokens are the tail of encode(context + continuation) beyond the length of
// encode(context), so a token merged across the boundary is scored as part of the continuation.
// BOS follows the tokenizer's add_bos flag, as HF's add_special_tokens default does.
TokenizedPair encode_pair(const Tokenizer& tok, std::string_view context, std::string_view continuation);

// Sums log p(continuation | context). Each request reuses the KV cache for the longest prefix it
// shares with the previous one, so a context scored with several continuations in a row is
// prefilled once (not under a policy that ranks whole calls: see score()). Inputs longer than the
// transformer's context lose tokens from the left, as in lm-eval (the continuation itself must fit).
struct Loglikelihood {
  double log_prob = 0.0;  // sum over the continuation's tokens
  bool greedy = true;     // every continuation token is the arg-max (lm-eval's is_greedy)
};

class LoglikelihoodScorer {
 public:
  explicit LoglikelihoodScorer(Transformer& tf) : tf_(tf) {}
  Loglikelihood score(const TokenizedPair& pair);
  // The tokens the cache holds after the last score(): the pair fed, less what did not fit on the left.
  const std::vector<int32_t>& cached() const { return cached_; }

 private:
  Transformer& tf_;
  std::vector<int32_t> cached_;  // the tokens whose keys and values the cache holds
};

}  // namespace ts
