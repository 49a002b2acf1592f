#pragma once
// What training and the recall metrics compare the predictor with: the engine's own pre-softmax
// attention logits q·k / sqrt(D) (post-RoPE queries, the F16 cached keys the attention reads) of
// every layer >= first_layer and query head, over the causal pairs of one sequence.
#include <cstdint>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "policies/tokenbutler/butler_net.h"
#include "runtime/policy.h"
#include "runtime/transformer.h"

namespace ts {

// A passive policy run with the LLM: records the layer-0 attention input (the predictor's input)
// and the queries of the predicted layers; attention stays dense.
class AttentionCapture final : public Policy {
 public:
  explicit AttentionCapture(uint32_t first_layer)
      : Policy({"attention_capture", {}}), first_layer_(first_layer) {}

  void bind(const Model& model) override;
  std::vector<HookClaim> claims() const override;
  void observe_layer_input(const LayerInput& in) override;
  void observe_queries(const QueryRows& q) override;

  const std::vector<float>& input() const { return input_; }                         // [pos][E]
  const std::vector<float>& queries(size_t layer) const { return queries_[layer]; }  // [pos][H * D]

 private:
  uint32_t first_layer_;
  size_t n_layers_ = 0, n_embd_ = 0;
  std::vector<float> input_;
  std::vector<std::vector<float>> queries_;
};

// Runs `tokens` through the LLM (a fresh sequence) with capture attached, as one call.
void run_with_capture(Transformer& tf, std::span<const int32_t> tokens);

// The two n x n row-major logit matrices of one predicted (layer, head); entries j > i are
// computed but not meaningful (causal).
struct LogitPair {
  size_t layer, head, n;
  const float* target;     // [n][n], q_i·k_j / sqrt(D)
  const float* predicted;  // [n][n], q_imp_i·k_imp_j / sqrt(d)
};

// The query rows whose logits enter the loss: every row (n_rows 0 or >= n), else n_rows of the n
// drawn without replacement by `seed`, ascending.
std::vector<uint32_t> loss_rows(size_t n, size_t n_rows, uint64_t seed);

// MSE between predicted and target logits over the causal entries (j <= i) of query rows `rows`
// (ascending) of every predicted (layer, head), averaged over all of them; writes d loss / d q_imp
// (the rows' entries) and d k_imp ([n][n_out]). A layer's heads go to the pool's threads; the
// result does not depend on their number. Fewer rows than n estimate the all-rows loss at a
// fraction of its cost (the keys of every row still enter through the sampled queries).
double butler_mse(const ButlerConfig& c, const Transformer& tf, const AttentionCapture& cap,
                  const ButlerActs& a, std::span<const uint32_t> rows, ThreadPool& pool, float* d_q_imp,
                  float* d_k_imp);

// Calls f for every predicted (layer, head) of the captured sequence with both logit matrices.
void for_each_logit_pair(const ButlerConfig& c, const Transformer& tf, const AttentionCapture& cap,
                         const ButlerActs& a, const std::function<void(const LogitPair&)>& f);

}  // namespace ts
