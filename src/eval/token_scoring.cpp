#include "eval/token_scoring.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ts {
namespace {

// Rows per forward call: bounds the logits buffer (rows x n_vocab floats, 100 MB for a 49k
// vocabulary) and the activation scratch whatever the window length.
constexpr size_t kBatchRows = 512;

}  // namespace

double token_log_prob(const float* logits, size_t n_vocab, int32_t target) {
  float mx = logits[0];
  for (size_t i = 1; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
  double sum = 0.0;
  for (size_t i = 0; i < n_vocab; ++i) sum += std::exp(double(logits[i]) - mx);
  return double(logits[target]) - mx - std::log(sum);
}

void score_tokens(Transformer& tf, std::span<const int32_t> tokens, size_t keep, size_t first_target,
                  const std::function<void(double)>& on_log_prob) {
  TS_CHECK(keep < first_target && first_target <= tokens.size() && keep <= tf.n_past(),
           "score_tokens: bad ranges (keep ", keep, ", first target ", first_target, ", ", tokens.size(),
           " tokens, ", tf.n_past(), " cached)");
  const size_t n_vocab = tf.model().config().n_vocab;
  tf.truncate(keep);
  // Positions before the first predicting one only need their keys and values.
  for (size_t pos = keep; pos + 1 < first_target;) {
    const size_t n = std::min(kBatchRows, first_target - 1 - pos);
    tf.forward(tokens.subspan(pos, n), false);
    pos += n;
  }
  // Position p's logits predict token p + 1; the last token is only a target.
  for (size_t pos = first_target - 1; pos + 1 < tokens.size();) {
    const size_t n = std::min(kBatchRows, tokens.size() - 1 - pos);
    const std::span<const float> logits = tf.forward(tokens.subspan(pos, n), true);
    for (size_t r = 0; r < n; ++r)
      on_log_prob(token_log_prob(&logits[r * n_vocab], n_vocab, tokens[pos + r + 1]));
    pos += n;
  }
}

}  // namespace ts
