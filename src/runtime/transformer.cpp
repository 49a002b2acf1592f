#include "runtime/transformer.h"

#include <algorithm>

namespace ts {
namespace {
// Tokens per internal pass: bounds scratch memory while keeping matrix products batched.
constexpr size_t kMaxBatch = 512;
}  // namespace

Transformer::Transformer(const Model& model, ThreadPool& pool, size_t n_ctx, MatmulPrecision precision)
    : pass_(model, pool, precision), seq_(model.config(), n_ctx) {}

std::span<const float> Transformer::forward(std::span<const int32_t> tokens, bool all_logits) {
  const size_t n_vocab = model().config().n_vocab;
  logits_.resize((all_logits ? tokens.size() : 1) * n_vocab);
  const size_t first_row = all_logits || tokens.empty() ? 0 : tokens.size() - 1;
  forward_logits(tokens, first_row, [&](size_t row, std::span<const float> logits) {
    std::copy(logits.begin(), logits.end(), logits_.begin() + (row - first_row) * n_vocab);
  });
  return logits_;
}

void run_call(ForwardPass& pass, Sequence& seq, std::span<const int32_t> tokens, size_t first_row,
              const CallLogitsSink& on_logits) {
  const SequenceStep whole{&seq, tokens, first_row};
  pass.check({&whole, 1});  // before any batch runs: a rejected call leaves the sequence as it was
  // A policy that ranks the tokens of a call against each other (OrthoRank) sees the call whole.
  const size_t max_batch = seq.ranks_whole_calls() ? tokens.size() : kMaxBatch;
  for (size_t start = 0; start < tokens.size(); start += max_batch) {
    const size_t n = std::min(max_batch, tokens.size() - start);
    const SequenceStep step{&seq, tokens.subspan(start, n), std::max(first_row, start) - start};
    pass.run({&step, 1},
             [&](size_t, size_t row, std::span<const float> logits) { on_logits(start + row, logits); });
    seq.end_batch();  // evictions between batches: a long prompt's cache shrinks as it goes
  }
}

}  // namespace ts
