#pragma once
// The forward pass of a Llama-family decoder, batched over the tokens of one call:
//   x -> RMSNorm -> Q,K,V -> RoPE -> KV cache -> attention -> O -> +x -> RMSNorm -> SwiGLU FFN -> +x
#include <cstdint>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"
#include "runtime/kv_cache.h"

namespace ts {

class Transformer {
 public:
  // n_ctx: maximum positions held by the KV cache.
  Transformer(const Model& model, ThreadPool& pool, size_t n_ctx,
              MatmulPrecision precision = MatmulPrecision::Fast);

  // Appends `tokens` at positions n_past()..; returns logits (n_vocab floats per row) for the
  // last token, or for every token when all_logits. The span stays valid until the next call.
  std::span<const float> forward(std::span<const int32_t> tokens, bool all_logits);

  size_t n_past() const { return cache_.size(); }
  size_t n_ctx() const { return cache_.capacity(); }
  // Forgets cached positions >= n (e.g. to start a new window or reuse a shared prefix).
  void truncate(size_t n);
  const KvCache& cache() const { return cache_; }
  const Model& model() const { return model_; }

 private:
  void forward_batch(std::span<const int32_t> tokens, bool all_logits, float* logits);
  void attention(size_t layer, size_t n_tok, size_t pos0);
  void resize_scratch(size_t n_tok);

  const Model& model_;
  ThreadPool& pool_;
  MatmulPrecision precision_;
  KvCache cache_;
  // Activations of the current batch, row-major [token][feature].
  std::vector<float> x_, xn_, q_, k_, v_, attn_out_, gate_, up_, logits_;
  std::vector<float> rope_cos_, rope_sin_;  // rope_tables() of each token of the batch
  // Partial attention results per (token, KV head, key chunk, query head in group).
  std::vector<float> part_m_, part_l_, part_acc_;
  size_t scratch_tokens_ = 0;
};

}  // namespace ts
