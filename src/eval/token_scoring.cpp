#include "eval/token_scoring.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ts {

TokenScore token_score(const float* logits, size_t n_vocab, int32_t target) {
  size_t arg_max = 0;
  for (size_t i = 1; i < n_vocab; ++i)
    if (logits[i] > logits[arg_max]) arg_max = i;
  const float mx = logits[arg_max];
  double sum = 0.0;
  for (size_t i = 0; i < n_vocab; ++i) sum += std::exp(double(logits[i]) - mx);
  return {double(logits[target]) - mx - std::log(sum), arg_max == static_cast<size_t>(target)};
}

void score_tokens(Transformer& tf, std::span<const int32_t> tokens, size_t keep, size_t first_target,
                  const std::function<void(const TokenScore&)>& on_score) {
  TS_CHECK(keep < first_target && first_target < tokens.size() && keep <= tf.n_past(),
           "score_tokens: bad ranges (keep ", keep, ", first target ", first_target, ", ", tokens.size(),
           " tokens, ", tf.n_past(), " cached)");
  const size_t n_vocab = tf.model().config().n_vocab;
  tf.truncate(keep);
  // One call, so a policy that ranks the tokens of a call together sees the whole span. Row r of
  // the call is position keep + r, whose logits predict token keep + r + 1; the last token is
  // only a target.
  tf.forward_logits(tokens.subspan(keep, tokens.size() - 1 - keep), first_target - 1 - keep,
                    [&](size_t first_row, std::span<const float> logits) {
                      for (size_t r = 0; r < logits.size() / n_vocab; ++r) {
                        const int32_t target = tokens[keep + first_row + r + 1];
                        on_score(token_score(&logits[r * n_vocab], n_vocab, target));
                      }
                    });
}

}  // namespace ts
