#pragma once
// The forward pass of a Llama-family decoder, batched over the tokens of one call:
//   x -> RMSNorm -> Q,K,V -> RoPE -> KV cache -> attention -> O -> +x -> RMSNorm -> SwiGLU FFN -> +x
// Token-sparsification policies (policy.h) can act at each step; without them it is dense.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"
#include "runtime/kv_cache.h"
#include "runtime/policy_stack.h"
#include "runtime/row_set.h"

namespace ts {

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
  using LogitsSink = std::function<void(size_t first_row, std::span<const float> logits)>;
  void forward_logits(std::span<const int32_t> tokens, size_t first_row, const LogitsSink& on_logits);

  size_t n_past() const { return cache_.size(); }
  size_t n_ctx() const { return cache_.capacity(); }
  // Forgets cached positions >= n (e.g. to start a new window or reuse a shared prefix).
  void truncate(size_t n);
  const KvCache& cache() const { return cache_; }
  const Model& model() const { return model_; }

  // Policies for the following calls (nullptr: dense); only between sequences (n_past() == 0).
  void set_policies(std::unique_ptr<PolicyStack> policies);
  const PolicyStack* policies() const { return policies_.get(); }
  bool ranks_whole_calls() const { return policies_ && policies_->ranks_whole_calls(); }
  // Records the policies' decisions into `log` until set_decision_log(nullptr).
  void set_decision_log(DecisionLog* log);

 private:
  // Checks the call and runs it in batches, after_batch(start, n) seeing each batch's final states.
  void run_batches(std::span<const int32_t> tokens, const std::function<void(size_t, size_t)>& after_batch);
  void forward_batch(std::span<const int32_t> tokens);
  void output_logits(size_t first_row, size_t n_rows, float* logits);
  void plan_layer(size_t layer, size_t n_tok, size_t pos0);
  void attention_block(size_t layer, size_t n_tok, size_t pos0);
  void ffn_block(size_t layer);
  void rms_norm_rows(const float* x, const std::vector<float>& weight, float* y, size_t n_rows);
  void rope_row(float* x, size_t batch_row, size_t n_heads) const;
  void rope_rows(float* x, const RowSet& rows, size_t n_heads, size_t stride);
  void rope_and_store(size_t layer, size_t n_tok, size_t pos0, bool rotate_k, bool rotate_q,
                      const KvStorage* storage);
  void attend(size_t layer, size_t pos0);
  void attend_listed(size_t layer, size_t pos0);
  // How attend and attend_listed cut key streams into work items (see plan_key_chunks).
  struct KeyChunks {
    size_t chunk, n_chunks, min_items;
  };
  KeyChunks plan_key_chunks(size_t streams, size_t n_keys_max, size_t queries = 0,
                            size_t extra_parts = 0);
  LayerInput layer_input(size_t layer, size_t n_tok, size_t pos0) const;
  void resize_scratch(size_t n_tok);

  const Model& model_;
  ThreadPool& pool_;
  MatmulPrecision precision_;
  KvCache cache_;
  std::unique_ptr<PolicyStack> policies_;
  DecisionLog* log_ = nullptr;

  // Activations of the current batch, row-major [token][feature]. Steps on a token subset use the
  // first rows of q_, k_, v_, attn_out_, gate_, up_ as a compact batch; xg_ holds gathered inputs.
  std::vector<float> x_, xn_, xg_, q_, k_, v_, attn_out_, gate_, up_, logits_;
  std::vector<float> rope_cos_, rope_sin_;  // rope_tables() of each token of the batch
  LayerRows rows_;                          // which tokens run each step of the current layer
  std::vector<KvStorage> kv_storage_;       // per rows_.kv row, as the policies chose
  std::vector<uint32_t> stored_positions_;
  // Partial attention results per (token, KV head, key chunk, query head in group); attend_listed:
  // per (gather, key chunk, query head in gather).
  std::vector<float> part_m_, part_l_, part_acc_;
  // attend()'s query tiles: first row of each tile (and rows_.attn.size() last), each row's tile.
  std::vector<size_t> tile_first_row_, row_tile_;
  // Attention over key lists: per (row, query head) the keys read, the policy's lists, probabilities.
  std::vector<std::span<const uint32_t>> key_spans_;
  std::vector<std::vector<uint32_t>> key_lists_;
  std::vector<std::vector<float>> attn_probs_;
  // One gather of a list: the (row, query head) index of its first head in key_spans_, and how
  // many adjacent query heads of one KV head read it.
  struct Gather {
    uint32_t task, n_q;
  };
  std::vector<Gather> gathers_;
  size_t scratch_tokens_ = 0;
};

}  // namespace ts
