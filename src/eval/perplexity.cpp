#include "eval/perplexity.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ts {

void NllAccumulator::add(double log_prob) {
  nll -= log_prob;
  nll2 += log_prob * log_prob;
  ++count;
}

double NllAccumulator::ppl() const { return std::exp(nll / double(count)); }

double NllAccumulator::ppl_stderr() const {
  if (count < 2) return 0.0;
  const double mean = nll / double(count), var = nll2 / double(count) - mean * mean;
  return ppl() * std::sqrt(std::max(0.0, var) / double(count - 1));
}

PerplexityResult perplexity_windows(Transformer& tf, const std::vector<int32_t>& tokens, size_t n_ctx,
                                    size_t max_chunks, int32_t bos, const OnWindow& on_chunk,
                                    const Shard& shard) {
  TS_CHECK(n_ctx >= 8, "the perplexity window must be at least 8 tokens");
  TS_CHECK(n_ctx <= tf.n_ctx(), "the perplexity window ", n_ctx, " exceeds the context ", tf.n_ctx());
  size_t windows = tokens.size() / n_ctx;
  TS_CHECK(windows > 0, tokens.size(), " tokens is fewer than one window of ", n_ctx, " (lower -c)");
  if (max_chunks) windows = std::min(windows, max_chunks);
  const auto [first, end] = shard.range(windows);
  PerplexityResult r;
  r.chunks = end - first;
  std::vector<int32_t> window(n_ctx);
  std::vector<double> log_probs;
  for (size_t c = first; c < end; ++c) {
    std::copy_n(tokens.begin() + static_cast<std::ptrdiff_t>(c * n_ctx), n_ctx, window.begin());
    if (bos >= 0) window[0] = bos;
    log_probs.clear();
    score_tokens(tf, window, 0, n_ctx / 2 + 1, [&](const TokenScore& s) {
      r.acc.add(s.log_prob);
      log_probs.push_back(s.log_prob);
    });
    on_chunk(c + 1, r.acc, log_probs);
  }
  return r;
}

size_t strided_window_count(size_t n_tokens, size_t n_ctx, size_t stride) {
  if (n_tokens <= n_ctx) return 1;
  return 1 + (n_tokens - n_ctx + stride - 1) / stride;
}

PerplexityResult perplexity_strided(Transformer& tf, const std::vector<int32_t>& tokens, size_t n_ctx,
                                    size_t stride, size_t max_windows, const OnWindow& on_window,
                                    const Shard& shard) {
  TS_CHECK(n_ctx >= 2 && n_ctx <= tf.n_ctx(), "the perplexity window ", n_ctx, " must be in [2, ", tf.n_ctx(),
           "]");
  TS_CHECK(stride >= 1 && stride <= n_ctx, "the stride ", stride, " must be in [1, ", n_ctx, "]");
  TS_CHECK(tokens.size() >= 2, "the text is ", tokens.size(), " tokens, too short to score");
  size_t windows = strided_window_count(tokens.size(), n_ctx, stride);
  if (max_windows) windows = std::min(windows, max_windows);
  const auto [first, end] = shard.range(windows);
  PerplexityResult r;
  r.chunks = end - first;
  // Tokens before this were scored by an earlier window (the previous one's end).
  size_t scored_end = first ? std::min((first - 1) * stride + n_ctx, tokens.size()) : 0;
  std::vector<double> log_probs;
  for (size_t w = first; w < end; ++w) {
    const size_t begin = w * stride, end = std::min(begin + n_ctx, tokens.size());
    const std::span<const int32_t> window(tokens.data() + begin, end - begin);
    log_probs.clear();
    score_tokens(tf, window, 0, std::max(scored_end, begin + 1) - begin, [&](const TokenScore& s) {
      r.acc.add(s.log_prob);
      log_probs.push_back(s.log_prob);
    });
    scored_end = end;
    on_window(w + 1, r.acc, log_probs);
  }
  return r;
}

}  // namespace ts
