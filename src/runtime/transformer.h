#pragma once
// One sequence through the forward pass (forward_pass.h), call by call: the engine as a single
// user sees it. Appending tokens runs them in batches of at most kMaxBatch rows (scratch memory
// stays bounded, matrix products stay batched); a server advancing several sequences per step
// drives ForwardPass directly.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "runtime/forward_pass.h"
#include "runtime/sequence.h"

namespace ts {

// Logits of rows first_row.. of a call, in slices: (the slice's first row, n_vocab floats per row).
using CallLogitsSink = std::function<void(size_t first_row, std::span<const float> logits)>;

// Appends `tokens` to `seq` as one call: in batches of at most kMaxBatch rows, or one batch when
// its policies rank a call's tokens together (ranks_whole_calls); hands the logits of rows
// first_row.. to on_logits, then ends the call. Checks the whole call before running any of it.
void run_call(ForwardPass& pass, Sequence& seq, std::span<const int32_t> tokens, size_t first_row,
              const CallLogitsSink& on_logits);

class Transformer {
 public:
  // n_ctx: maximum positions held by the KV cache.
  Transformer(const Model& model, ThreadPool& pool, size_t n_ctx,
              MatmulPrecision precision = MatmulPrecision::Fast);

  // Appends `tokens` at positions n_past()..; returns logits (n_vocab floats per row) for the
  // last token, or for every token when all_logits. The span stays valid until the next call.
  std::span<const float> forward(std::span<const int32_t> tokens, bool all_logits);
  // Appends `tokens` as one call and hands the logits of rows first_row.. to on_logits in slices
  // (the slice's first row, n_vocab floats per row), so a long window needs no logits buffer of
  // its size. Scorers use it to keep a window in one call: a policy that ranks the tokens of a
  // call together (ranks_whole_calls) decides differently when the window comes in pieces.
  using LogitsSink = CallLogitsSink;
  void forward_logits(std::span<const int32_t> tokens, size_t first_row, const LogitsSink& on_logits) {
    run_call(pass_, seq_, tokens, first_row, on_logits);
  }

  size_t n_past() const { return seq_.n_past(); }
  size_t n_ctx() const { return seq_.n_ctx(); }
  // Forgets cached positions >= n (Sequence::truncate: n is 0 or a rewind_point answer).
  void truncate(size_t n) { seq_.truncate(n); }
  const KvCache& cache() const { return seq_.cache(); }
  const Model& model() const { return pass_.model(); }

  // Policies for the following calls (nullptr: dense); only between sequences (n_past() == 0).
  void set_policies(std::unique_ptr<PolicyStack> policies) { seq_.set_policies(std::move(policies)); }
  const PolicyStack* policies() const { return seq_.policies(); }
  bool ranks_whole_calls() const { return seq_.ranks_whole_calls(); }
  size_t rewind_point(size_t n) const { return seq_.rewind_point(n); }
  // Records the policies' decisions into `log` until set_decision_log(nullptr).
  void set_decision_log(DecisionLog* log) { seq_.set_decision_log(log); }

 private:
  ForwardPass pass_;
  Sequence seq_;
  std::vector<float> logits_;
};

}  // namespace ts
