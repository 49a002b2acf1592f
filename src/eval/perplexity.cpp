#include "eval/perplexity.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ts {

double token_log_prob(const float* logits, size_t n_vocab, int32_t target) {
  float mx = logits[0];
  for (size_t i = 1; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
  double sum = 0.0;
  for (size_t i = 0; i < n_vocab; ++i) sum += std::exp(double(logits[i]) - mx);
  return double(logits[target]) - mx - std::log(sum);
}

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
                                    size_t max_chunks, int32_t bos,
                                    const std::function<void(size_t, const NllAccumulator&)>& on_chunk) {
  TS_CHECK(n_ctx >= 8, "the perplexity window must be at least 8 tokens");
  TS_CHECK(n_ctx <= tf.n_ctx(), "the perplexity window ", n_ctx, " exceeds the context ", tf.n_ctx());
  PerplexityResult r;
  r.chunks = tokens.size() / n_ctx;
  TS_CHECK(r.chunks > 0, tokens.size(), " tokens is fewer than one window of ", n_ctx, " (lower -c)");
  if (max_chunks) r.chunks = std::min(r.chunks, max_chunks);
  const size_t n_vocab = tf.model().config().n_vocab, first = n_ctx / 2;
  std::vector<int32_t> window(n_ctx);
  for (size_t c = 0; c < r.chunks; ++c) {
    std::copy_n(tokens.begin() + static_cast<std::ptrdiff_t>(c * n_ctx), n_ctx, window.begin());
    if (bos >= 0) window[0] = bos;
    tf.truncate(0);
    const std::span<const float> logits = tf.forward(window, true);
    for (size_t i = first; i + 1 < n_ctx; ++i) r.acc.add(token_log_prob(&logits[i * n_vocab], n_vocab, window[i + 1]));
    on_chunk(c + 1, r.acc);
  }
  return r;
}

}  // namespace ts
