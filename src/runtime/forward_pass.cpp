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
// Rows per output projection in forward_logits: bounds the logits buffer (rows x n_vocab floats).
constexpr size_t kMaxLogitRows = 512;

void add_in_place(float* x, const float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] += y[i];
}

void add_bias(float* x, const std::vector<float>& bias, size_t n_rows) {
  for (size_t r = 0; r < n_rows; ++r) add_in_place(x + r * bias.size(), bias.data(), bias.size());
}
}  // namespace

Transformer::Transformer(const Model& model, ThreadPool& pool, size_t n_ctx, MatmulPrecision precision)
    : model_(model),
      pool_(pool),
      precision_(precision),
      cache_(model.config().n_layers, n_ctx, size_t{model.config().n_kv_heads} * model.config().head_dim,
             model.config().head_dim) {}

void Transformer::truncate(size_t n) {
  cache_.set_size(std::min(n, cache_.size()));
  if (policies_) policies_->truncate(n_past());
}

void Transformer::set_policies(std::unique_ptr<PolicyStack> policies) {
  TS_CHECK(n_past() == 0, "policies change only between sequences (", n_past(), " positions are cached)");
  policies_ = std::move(policies);
  if (policies_) policies_->set_log(log_);
  const KvFormat format = policies_ && policies_->kv_format() ? *policies_->kv_format() : KvFormat{};
  if (format.describe() != cache_.format().describe() || format.ranges != cache_.format().ranges) {
    const ModelConfig& c = model_.config();
    cache_ = KvCache(c.n_layers, cache_.capacity(), cache_.kv_dim(), c.head_dim, format);
  }
}

void Transformer::set_decision_log(DecisionLog* log) {
  log_ = log;
  if (policies_) policies_->set_log(log);
}

void Transformer::resize_scratch(size_t n_tok) {
  if (n_tok <= scratch_tokens_) return;
  const ModelConfig& c = model_.config();
  const size_t d = c.n_embd, kv = cache_.kv_dim();
  x_.resize(n_tok * d);
  xn_.resize(n_tok * d);
  xg_.resize(n_tok * d);
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
  logits_.resize((all_logits ? tokens.size() : 1) * n_vocab);
  run_batches(tokens, [&](size_t start, size_t n) {
    if (all_logits) {
      output_logits(0, n, &logits_[start * n_vocab]);
    } else if (start + n == tokens.size()) {
      output_logits(n - 1, 1, logits_.data());
    }
  });
  return logits_;
}

void Transformer::forward_logits(std::span<const int32_t> tokens, size_t first_row,
                                 const LogitsSink& on_logits) {
  const size_t n_vocab = model_.config().n_vocab;
  run_batches(tokens, [&](size_t start, size_t n) {
    for (size_t row = std::max(first_row, start); row < start + n; row += kMaxLogitRows) {
      const size_t rows = std::min(kMaxLogitRows, start + n - row);
      logits_.resize(std::max(logits_.size(), rows * n_vocab));
      output_logits(row - start, rows, logits_.data());
      on_logits(row, std::span<const float>(logits_).first(rows * n_vocab));
    }
  });
}

void Transformer::run_batches(std::span<const int32_t> tokens,
                              const std::function<void(size_t, size_t)>& after_batch) {
  const size_t n_vocab = model_.config().n_vocab;
  TS_CHECK(!tokens.empty(), "forward: no tokens");
  TS_CHECK(n_past() + tokens.size() <= n_ctx(), "context overflow: ", n_past(), " cached + ", tokens.size(),
           " new tokens exceed the context size ", n_ctx(), " (raise -c)");
  for (int32_t t : tokens)
    TS_CHECK(t >= 0 && static_cast<size_t>(t) < n_vocab, "token id ", t, " is outside the vocabulary");
  // A policy that ranks the tokens of a call against each other (OrthoRank) sees the call whole.
  const size_t max_batch = ranks_whole_calls() ? tokens.size() : kMaxBatch;
  for (size_t start = 0; start < tokens.size(); start += max_batch) {
    const size_t n = std::min(max_batch, tokens.size() - start);
    forward_batch(tokens.subspan(start, n));
    after_batch(start, n);
  }
  if (policies_) policies_->end_call(cache_);
}

void Transformer::forward_batch(std::span<const int32_t> tokens) {
  const ModelConfig& c = model_.config();
  const size_t n = tokens.size(), d = c.n_embd, pos0 = cache_.size();
  resize_scratch(n);
  for (size_t t = 0; t < n; ++t) {
    weight_row_to_float(model_.token_embd(), static_cast<size_t>(tokens[t]), &x_[t * d]);
    rope_tables(static_cast<float>(pos0 + t), model_.rope_inv_freq().data(), c.rot_dim, c.rope_layout,
                &rope_cos_[t * c.rot_dim], &rope_sin_[t * c.rot_dim]);
  }
  if (policies_) policies_->begin_batch(pos0, n);
  cache_.begin_batch(pos0, n);

  for (size_t l = 0; l < c.n_layers; ++l) {
    rms_norm_rows(x_.data(), model_.layers()[l].attn_norm, xn_.data(), n);  // every token: K/V need it
    plan_layer(l, n, pos0);  // rows_: which tokens run which step (dense: all of them, all steps)
    if (rows_.idle()) {      // the whole layer is skipped (SLEB), K/V too
      cache_.commit(l, pos0, n);
      cache_.hold_only(l, pos0, {});
      continue;
    }
    attention_block(l, n, pos0);  // x += O(attention) for rows_.attn; K/V of rows_.kv cached
    ffn_block(l);                 // x += FFN(RMSNorm(x)) for rows_.ffn
  }
  cache_.set_size(pos0 + n);
}

// Logits of batch rows first_row..first_row+n_rows-1 from their final hidden states.
void Transformer::output_logits(size_t first_row, size_t n_rows, float* logits) {
  const size_t d = model_.config().n_embd;
  rms_norm_rows(&x_[first_row * d], model_.output_norm(), &xn_[first_row * d], n_rows);
  matmul(model_.output(), &xn_[first_row * d], n_rows, logits, pool_, precision_);
}

LayerInput Transformer::layer_input(size_t layer, size_t n_tok, size_t pos0) const {
  return {layer, pos0, n_tok, model_.config().n_embd, x_.data(), xn_.data()};
}

void Transformer::plan_layer(size_t layer, size_t n_tok, size_t pos0) {
  if (policies_) {
    policies_->plan_layer(layer_input(layer, n_tok, pos0), rows_);
  } else {
    rows_.set_all(n_tok);
  }
}

void Transformer::attention_block(size_t layer, size_t n_tok, size_t pos0) {
  const ModelConfig& c = model_.config();
  const LayerWeights& L = model_.layers()[layer];
  const size_t d = c.n_embd, kv = cache_.kv_dim();

  // K and V of rows_.kv, with Q in the same product when the same tokens need it (dense layers)
  // or when the policy deciding attention skips reads every row's query.
  const bool skips = policies_ && policies_->skips_attention(layer);
  const bool skip_reads_q = skips && policies_->skips_by_queries(layer);
  const bool fused_qkv = rows_.attn == rows_.kv && (!skips || skip_reads_q);
  const float* x_kv = rows_.kv.gather(xn_.data(), d, xg_);
  if (fused_qkv) {
    matmul_many({{&L.wq, q_.data()}, {&L.wk, k_.data()}, {&L.wv, v_.data()}}, x_kv, rows_.kv.size(), pool_,
                precision_);
  } else {
    matmul_many({{&L.wk, k_.data()}, {&L.wv, v_.data()}}, x_kv, rows_.kv.size(), pool_, precision_);
  }
  if (c.qkv_bias) {
    if (fused_qkv) add_bias(q_.data(), L.bq, rows_.kv.size());
    add_bias(k_.data(), L.bk, rows_.kv.size());
    add_bias(v_.data(), L.bv, rows_.kv.size());
  }
  // Policies that look at the rotated keys (and queries) before they are stored get them first.
  const bool kv_decided = policies_ && policies_->decides_kv(layer);
  if (kv_decided) {
    rope_rows(k_.data(), rows_.kv, c.n_kv_heads, kv);
    if (skip_reads_q) rope_rows(q_.data(), rows_.kv, c.n_heads, d);
    const KvRows written{layer,      pos0,      &rows_.kv, kv,
                         c.head_dim, k_.data(), v_.data(), skip_reads_q ? q_.data() : nullptr,
                         c.n_heads};
    policies_->decide_kv(layer_input(layer, n_tok, pos0), written, rows_, kv_storage_);
  }
  rope_and_store(layer, n_tok, pos0, !kv_decided, fused_qkv && !skip_reads_q,
                 kv_decided ? kv_storage_.data() : nullptr);
  if (rows_.attn.empty()) return;

  // Q (unless projected above), attention and O of rows_.attn.
  const size_t m = rows_.attn.size();
  if (!fused_qkv) {
    matmul(L.wq, rows_.attn.gather(xn_.data(), d, xg_), m, q_.data(), pool_, precision_);
    if (c.qkv_bias) add_bias(q_.data(), L.bq, m);
    rope_rows(q_.data(), rows_.attn, c.n_heads, d);
  } else if (m < rows_.kv.size()) {  // the queries of the rows left attending, compacted in order
    for (size_t i = 0; i < m; ++i) {
      const size_t from = rows_.kv.index_of(rows_.attn[i]);
      if (from != i) std::copy_n(&q_[from * d], d, &q_[i * d]);
    }
  }
  const bool key_lists =
      policies_ && (policies_->key_selector(layer) || policies_->observes_attention(layer));
  if (key_lists) {
    attend_listed(layer, pos0);
  } else {
    attend(layer, pos0);
  }
  matmul(L.wo, attn_out_.data(), m, xn_.data(), pool_, precision_);
  rows_.attn.add_to(xn_.data(), d, x_.data());
}

void Transformer::ffn_block(size_t layer) {
  const ModelConfig& c = model_.config();
  const LayerWeights& L = model_.layers()[layer];
  const size_t d = c.n_embd, m = rows_.ffn.size();
  if (m == 0) return;
  const SimdOps& k = ops();
  rms_norm_rows(rows_.ffn.gather(x_.data(), d, xg_), L.ffn_norm, xn_.data(), m);
  matmul_many({{&L.w_gate, gate_.data()}, {&L.w_up, up_.data()}}, xn_.data(), m, pool_, precision_);
  pool_.parallel_for(m, [&](size_t b, size_t e, int) {
    // Row by row: results must not depend on how tokens are split across threads.
    for (size_t t = b; t < e; ++t) k.silu_mul(&gate_[t * c.n_ff], &up_[t * c.n_ff], c.n_ff);
  });
  matmul(L.w_down, gate_.data(), m, xn_.data(), pool_, precision_);
  rows_.ffn.add_to(xn_.data(), d, x_.data());
}

void Transformer::rms_norm_rows(const float* x, const std::vector<float>& weight, float* y, size_t n_rows) {
  const ModelConfig& c = model_.config();
  const SimdOps& k = ops();
  pool_.parallel_for(n_rows, [&](size_t b, size_t e, int) {
    for (size_t t = b; t < e; ++t)
      k.rms_norm(x + t * c.n_embd, weight.data(), y + t * c.n_embd, c.n_embd, c.rms_eps);
  });
}

// Rotates the heads of one row with the tables of batch row `batch_row`: every token keeps its
// original position, whichever tokens run.
void Transformer::rope_row(float* x, size_t batch_row, size_t n_heads) const {
  const ModelConfig& c = model_.config();
  const float* cos_t = &rope_cos_[batch_row * c.rot_dim];
  const float* sin_t = &rope_sin_[batch_row * c.rot_dim];
  for (size_t h = 0; h < n_heads; ++h)
    ops().rope(x + h * c.head_dim, cos_t, sin_t, c.rot_dim, c.rope_layout == RopeLayout::Neox);
}

void Transformer::rope_rows(float* x, const RowSet& rows, size_t n_heads, size_t stride) {
  pool_.parallel_for(rows.size(), [&](size_t b, size_t e, int) {
    for (size_t i = b; i < e; ++i) rope_row(x + i * stride, rows[i], n_heads);
  });
}

// One pass over rows_.kv: RoPE on K (rotate_k) and on Q (rotate_q: Q rows are the K/V rows), then
// the cache write of every row not dropped (storage: per row, nullptr = all kept). Afterwards
// the cache learns which of the batch's positions this layer holds.
void Transformer::rope_and_store(size_t layer, size_t n_tok, size_t pos0, bool rotate_k, bool rotate_q,
                                 const KvStorage* storage) {
  const ModelConfig& c = model_.config();
  const size_t d = c.n_embd, kv = cache_.kv_dim();
  const RowSet& rows = rows_.kv;
  const auto dropped = [&](size_t i) { return storage && storage[i] == KvStorage::Dropped; };
  pool_.parallel_for(rows.size(), [&](size_t b, size_t e, int) {
    for (size_t i = b; i < e; ++i) {
      if (rotate_q) rope_row(&q_[i * d], rows[i], c.n_heads);
      if (rotate_k) rope_row(&k_[i * kv], rows[i], c.n_kv_heads);
      if (dropped(i)) continue;
      cache_.store(layer, pos0 + rows[i], &k_[i * kv], &v_[i * kv],
                   storage ? storage[i] : KvStorage::Default);
    }
  });
  cache_.commit(layer, pos0, n_tok);
  stored_positions_.clear();
  for (size_t i = 0; i < rows.size(); ++i)
    if (!dropped(i)) stored_positions_.push_back(static_cast<uint32_t>(pos0 + rows[i]));
  if (stored_positions_.size() == n_tok) {
    cache_.hold_all(layer, pos0, n_tok);
  } else {
    cache_.hold_only(layer, pos0, stored_positions_);
  }
}

}  // namespace ts
