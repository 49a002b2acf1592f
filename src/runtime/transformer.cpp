#include "runtime/transformer.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/elementwise.h"
#include "kernels/simd_ops.h"

namespace ts {
namespace {
// Tokens per internal pass: bounds scratch memory while keeping matrix products batched.
constexpr size_t kMaxBatch = 512;
// Fewest keys per attention work item: below this, merging partial results costs more than it saves.
constexpr size_t kMinKeyChunk = 256;

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

void add_in_place(float* x, const float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] += y[i];
}
}  // namespace

Transformer::Transformer(const Model& model, ThreadPool& pool, size_t n_ctx, MatmulPrecision precision)
    : model_(model),
      pool_(pool),
      precision_(precision),
      cache_(model.config().n_layers, n_ctx, size_t{model.config().n_kv_heads} * model.config().head_dim) {}

void Transformer::truncate(size_t n) { cache_.set_size(std::min(n, cache_.size())); }

void Transformer::resize_scratch(size_t n_tok) {
  if (n_tok <= scratch_tokens_) return;
  const ModelConfig& c = model_.config();
  const size_t d = c.n_embd, kv = cache_.kv_dim();
  x_.resize(n_tok * d);
  xn_.resize(n_tok * d);
  q_.resize(n_tok * d);
  k_.resize(n_tok * kv);
  v_.resize(n_tok * kv);
  attn_out_.resize(n_tok * d);
  gate_.resize(n_tok * c.n_ff);
  up_.resize(n_tok * c.n_ff);
  rope_cos_.resize(n_tok * c.rot_dim);
  rope_sin_.resize(n_tok * c.rot_dim);
  scratch_tokens_ = n_tok;
}

std::span<const float> Transformer::forward(std::span<const int32_t> tokens, bool all_logits) {
  const size_t n_vocab = model_.config().n_vocab;
  TS_CHECK(!tokens.empty(), "forward: no tokens");
  TS_CHECK(n_past() + tokens.size() <= n_ctx(), "context overflow: ", n_past(), " cached + ", tokens.size(),
           " new tokens exceed the context size ", n_ctx(), " (raise -c)");
  for (int32_t t : tokens)
    TS_CHECK(t >= 0 && static_cast<size_t>(t) < n_vocab, "token id ", t, " is outside the vocabulary");
  logits_.resize((all_logits ? tokens.size() : 1) * n_vocab);
  for (size_t start = 0; start < tokens.size(); start += kMaxBatch) {
    const size_t n = std::min(kMaxBatch, tokens.size() - start);
    const bool last_batch = start + n == tokens.size();
    float* out = all_logits ? logits_.data() + start * n_vocab : (last_batch ? logits_.data() : nullptr);
    forward_batch(tokens.subspan(start, n), all_logits, out);
  }
  return logits_;
}

void Transformer::forward_batch(std::span<const int32_t> tokens, bool all_logits, float* logits) {
  const ModelConfig& c = model_.config();
  const size_t n = tokens.size(), d = c.n_embd, kv = cache_.kv_dim(), pos0 = cache_.size();
  resize_scratch(n);

  const SimdOps& k = ops();
  for (size_t t = 0; t < n; ++t) {
    weight_row_to_float(model_.token_embd(), static_cast<size_t>(tokens[t]), &x_[t * d]);
    rope_tables(static_cast<float>(pos0 + t), model_.rope_inv_freq().data(), c.rot_dim, c.rope_layout,
                &rope_cos_[t * c.rot_dim], &rope_sin_[t * c.rot_dim]);
  }

  for (size_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& L = model_.layers()[l];
    pool_.parallel_for(n, [&](size_t b, size_t e, int) {
      for (size_t t = b; t < e; ++t) k.rms_norm(&x_[t * d], L.attn_norm.data(), &xn_[t * d], d, c.rms_eps);
    });
    matmul_many({{&L.wq, q_.data()}, {&L.wk, k_.data()}, {&L.wv, v_.data()}}, xn_.data(), n, pool_,
                precision_);
    if (c.qkv_bias) {
      for (size_t t = 0; t < n; ++t) {
        add_in_place(&q_[t * d], L.bq.data(), d);
        add_in_place(&k_[t * kv], L.bk.data(), kv);
        add_in_place(&v_[t * kv], L.bv.data(), kv);
      }
    }
    attention(l, n, pos0);
    matmul(L.wo, attn_out_.data(), n, xn_.data(), pool_, precision_);
    add_in_place(x_.data(), xn_.data(), n * d);

    pool_.parallel_for(n, [&](size_t b, size_t e, int) {
      for (size_t t = b; t < e; ++t) k.rms_norm(&x_[t * d], L.ffn_norm.data(), &xn_[t * d], d, c.rms_eps);
    });
    matmul_many({{&L.w_gate, gate_.data()}, {&L.w_up, up_.data()}}, xn_.data(), n, pool_, precision_);
    pool_.parallel_for(n, [&](size_t b, size_t e, int) {
      // Row by row: results must not depend on how tokens are split across threads.
      for (size_t t = b; t < e; ++t) k.silu_mul(&gate_[t * c.n_ff], &up_[t * c.n_ff], c.n_ff);
    });
    matmul(L.w_down, gate_.data(), n, xn_.data(), pool_, precision_);
    add_in_place(x_.data(), xn_.data(), n * d);
  }
  cache_.set_size(pos0 + n);

  if (!logits) return;
  const size_t first = all_logits ? 0 : n - 1, rows = n - first;
  for (size_t t = first; t < n; ++t)
    k.rms_norm(&x_[t * d], model_.output_norm().data(), &xn_[t * d], d, c.rms_eps);
  matmul(model_.output(), &xn_[first * d], rows, logits, pool_, precision_);
}

void Transformer::attention(size_t layer, size_t n_tok, size_t pos0) {
  const ModelConfig& c = model_.config();
  const size_t d = c.n_embd, kv = cache_.kv_dim(), hd = c.head_dim;
  const size_t group = c.n_heads / c.n_kv_heads;
  const SimdOps& k = ops();
  const bool neox = c.rope_layout == RopeLayout::Neox;

  pool_.parallel_for(n_tok, [&](size_t b, size_t e, int) {
    for (size_t t = b; t < e; ++t) {
      const float* cos_t = &rope_cos_[t * c.rot_dim];
      const float* sin_t = &rope_sin_[t * c.rot_dim];
      for (size_t h = 0; h < c.n_heads; ++h) k.rope(&q_[t * d + h * hd], cos_t, sin_t, c.rot_dim, neox);
      for (size_t h = 0; h < c.n_kv_heads; ++h) k.rope(&k_[t * kv + h * hd], cos_t, sin_t, c.rot_dim, neox);
      k.f32_to_f16(&k_[t * kv], cache_.key(layer, pos0 + t), kv);
      k.f32_to_f16(&v_[t * kv], cache_.value(layer, pos0 + t), kv);
    }
  });

  // Work items are (token, KV head, key chunk); each covers the `group` query heads of that KV
  // head, so a key row is read once for all of them. Decode has few (token, KV head) pairs, so
  // long caches are cut into chunks that the threads share (flash-decoding), merged below.
  const size_t pairs = n_tok * c.n_kv_heads, n_keys_max = pos0 + n_tok;
  const size_t want_tasks = 4 * static_cast<size_t>(pool_.size());
  size_t chunk = n_keys_max;
  if (pairs < want_tasks) chunk = std::max(kMinKeyChunk, ceil_div(n_keys_max, ceil_div(want_tasks, pairs)));
  const size_t n_chunks = ceil_div(n_keys_max, chunk), parts = pairs * n_chunks * group;
  part_m_.resize(parts);
  part_l_.resize(parts);
  part_acc_.resize(parts * hd);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  pool_.parallel_for(pairs * n_chunks, [&](size_t b, size_t e, int) {
    for (size_t task = b; task < e; ++task) {
      const size_t pair = task / n_chunks, ci = task % n_chunks;
      const size_t t = pair / c.n_kv_heads, kvh = pair % c.n_kv_heads;
      const size_t n_keys = pos0 + t + 1, start = ci * chunk;  // causal: keys up to this token
      float* m = &part_m_[task * group];
      float* l = &part_l_[task * group];
      if (start >= n_keys) {
        std::fill(l, l + group, 0.0f);
        continue;
      }
      k.attn_chunk(&q_[t * d + kvh * group * hd], group, cache_.key(layer, start) + kvh * hd,
                   cache_.value(layer, start) + kvh * hd, kv, std::min(chunk, n_keys - start), hd, scale, m,
                   l, &part_acc_[task * group * hd]);
    }
  });
  pool_.parallel_for(pairs, [&](size_t b, size_t e, int) {
    for (size_t pair = b; pair < e; ++pair) {
      const size_t t = pair / c.n_kv_heads, kvh = pair % c.n_kv_heads;
      for (size_t g = 0; g < group; ++g) {
        float mx = -INFINITY;
        for (size_t ci = 0; ci < n_chunks; ++ci) {
          const size_t i = (pair * n_chunks + ci) * group + g;
          if (part_l_[i] > 0.0f) mx = std::max(mx, part_m_[i]);
        }
        float* out = &attn_out_[t * d + (kvh * group + g) * hd];
        std::fill(out, out + hd, 0.0f);
        float denom = 0.0f;
        for (size_t ci = 0; ci < n_chunks; ++ci) {
          const size_t i = (pair * n_chunks + ci) * group + g;
          if (part_l_[i] <= 0.0f) continue;
          const float w = std::exp(part_m_[i] - mx);
          denom += w * part_l_[i];
          for (size_t x = 0; x < hd; ++x) out[x] += w * part_acc_[i * hd + x];
        }
        for (size_t x = 0; x < hd; ++x) out[x] /= denom;
      }
    }
  });
}

}  // namespace ts
