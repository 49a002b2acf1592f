#pragma once
// Perplexity protocols over a token stream.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "eval/subset.h"
#include "eval/token_scoring.h"
#include "runtime/transformer.h"

namespace ts {

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
  size_t chunks = 0;  // windows scored (by this shard)
};

// Called after each window with its number (1-based, counted over all windows, whatever the shard),
// the running sums and the window's scored tokens' log-probabilities.
using OnWindow = std::function<void(size_t, const NllAccumulator&, std::span<const double>)>;

// llama.cpp's llama-perplexity: non-overlapping windows of n_ctx tokens (the first replaced by
// `bos` when bos >= 0), each scored on its second half. max_chunks = 0 scores every window; `shard`
// scores its part of them (each window is independent of the others).
PerplexityResult perplexity_windows(Transformer& tf, const std::vector<int32_t>& tokens, size_t n_ctx,
                                    size_t max_chunks, int32_t bos, const OnWindow& on_chunk,
                                    const Shard& shard = {});

// Number of windows perplexity_strided evaluates on n_tokens (before max_windows).
size_t strided_window_count(size_t n_tokens, size_t n_ctx, size_t stride);

// The sliding window of HF transformers' perplexity guide: windows of up to n_ctx tokens start
// every `stride` tokens and each scores the tokens no earlier window scored, except its own first
// token, which has no context. With stride = n_ctx the windows are disjoint, each scored on all
// but its first token (GPTQ's protocol); smaller strides score every token after the first once,
// with at least n_ctx - stride tokens of context. Windows are fed as they are (no BOS inserted).
// max_windows = 0: all; `shard` scores its part of them.
PerplexityResult perplexity_strided(Transformer& tf, const std::vector<int32_t>& tokens, size_t n_ctx,
                                    size_t stride, size_t max_windows, const OnWindow& on_window,
                                    const Shard& shard = {});

}  // namespace ts
