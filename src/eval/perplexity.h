#pragma once
// Perplexity protocols over a token stream.
#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/transformer.h"

namespace ts {

// log p(target) under softmax(logits), computed stably in double precision.
double token_log_prob(const float* logits, size_t n_vocab, int32_t target);

// Running sums of negative log-likelihood; mean, perplexity and its standard error.
struct NllAccumulator {
  double nll = 0.0, nll2 = 0.0;
  size_t count = 0;
  void add(double log_prob);
  double ppl() const;
  double ppl_stderr() const;  // delta method: ppl * stderr of the mean NLL
};

struct PerplexityResult {
  NllAccumulator acc;
  size_t chunks = 0;
};

// llama.cpp's llama-perplexity: non-overlapping windows of n_ctx tokens (the first replaced by
// `bos` when bos >= 0), each scored on its second half. max_chunks = 0 scores every window.
// on_chunk(done, running) is called after each window.
PerplexityResult perplexity_windows(Transformer& tf, const std::vector<int32_t>& tokens, size_t n_ctx,
                                    size_t max_chunks, int32_t bos,
                                    const std::function<void(size_t, const NllAccumulator&)>& on_chunk);

}  // namespace ts
