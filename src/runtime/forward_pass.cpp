#include "runtime/forward_pass.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/elementwise.h"
#include "kernels/row_gather.h"
#include "kernels/simd_ops.h"

namespace ts {
namespace {
// Rows per output projection: bounds the logits buffer (rows x n_vocab floats).
constexpr size_t kMaxLogitRows = 512;

void add_in_place(float* x, const float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] += y[i];
}

void add_bias(float* x, const std::vector<float>& bias, size_t n_rows) {
  for (size_t r = 0; r < n_rows; ++r) add_in_place(x + r * bias.size(), bias.data(), bias.size());
}
// Rows per pass of the row-wise stages (the norms, O, the FFN): a call ranked whole (thousands of
// tokens) would otherwise hold buffers of its length, the FFN's two n_ff-wide ones the largest
// (SmolLM2 at 8192 tokens: 100 MB).
constexpr size_t kPassRows = 512;
}  // namespace

ForwardPass::ForwardPass(const Model& model, ThreadPool& pool, MatmulPrecision precision)
    : model_(model), pool_(pool), precision_(precision), parts_(static_cast<size_t>(pool.size())) {}

void ForwardPass::resize_scratch(size_t n_tok) {
  if (n_tok <= scratch_tokens_) return;
  const ModelConfig& c = model_.config();
  const size_t d = c.n_embd, kv = c.kv_dim();
  x_.resize(n_tok * d);
  xn_.resize(std::max(xn_.size(), std::min(n_tok, kPassRows) * d));  // whole norms: grown by run()
  q_.resize(n_tok * c.q_dim);
  k_.resize(n_tok * kv);
  v_.resize(n_tok * kv);
  gate_.resize(std::min(n_tok, kPassRows) * c.n_ff);
  up_.resize(std::min(n_tok, kPassRows) * c.n_ff);
  rope_cos_.resize(c.ropes.size());
  rope_sin_.resize(c.ropes.size());
  for (size_t r = 0; r < c.ropes.size(); ++r) {
    rope_cos_[r].resize(n_tok * c.rot_dim);
    rope_sin_[r].resize(n_tok * c.rot_dim);
  }
  scratch_tokens_ = n_tok;
}

void ForwardPass::check(std::span<const SequenceStep> steps) const {
  const size_t n_vocab = model_.config().n_vocab;
  for (size_t i = 0; i < steps.size(); ++i) {
    const SequenceStep& step = steps[i];
    TS_CHECK(step.seq, "forward: step ", i, " has no sequence");
    TS_CHECK(!step.tokens.empty(), "forward: no tokens");
    TS_CHECK(step.seq->n_past() + step.tokens.size() <= step.seq->n_ctx(),
             "context overflow: ", step.seq->n_past(), " cached + ", step.tokens.size(),
             " new tokens exceed the context size ", step.seq->n_ctx(), " (raise -c)");
    for (int32_t t : step.tokens)
      TS_CHECK(t >= 0 && static_cast<size_t>(t) < n_vocab, "token id ", t, " is outside the vocabulary");
    for (size_t j = 0; j < i; ++j)
      TS_CHECK(steps[j].seq != step.seq, "forward: one sequence twice in a batch");
  }
}

void ForwardPass::run(std::span<const SequenceStep> steps, const LogitsSink& on_logits) {
  check(steps);
  const ModelConfig& c = model_.config();
  const size_t d = c.n_embd;
  slices_.resize(steps.size());
  size_t n_rows = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    Slice& s = slices_[i];
    s.seq = steps[i].seq;
    s.row0 = n_rows;
    s.n_tok = steps[i].tokens.size();
    s.pos0 = s.seq->n_past();
    s.first_logit_row = std::min(steps[i].first_logit_row, s.n_tok);
    n_rows += s.n_tok;
  }
  resize_scratch(n_rows);
  for (size_t i = 0; i < steps.size(); ++i) {
    const Slice& s = slices_[i];
    for (size_t t = 0; t < s.n_tok; ++t) {
      const size_t row = s.row0 + t;
      weight_row_to_float(model_.token_embd(), static_cast<size_t>(steps[i].tokens[t]), &x_[row * d]);
      if (c.embedding_scale != 1.0f)
        for (size_t j = 0; j < d; ++j) x_[row * d + j] *= c.embedding_scale;
      for (size_t r = 0; r < c.ropes.size(); ++r)
        rope_tables(static_cast<float>(s.pos0 + t), model_.rope_inv_freq(r).data(), c.rot_dim,
                    c.traits.rope_layout, &rope_cos_[r][row * c.rot_dim], &rope_sin_[r][row * c.rot_dim]);
    }
    if (s.policies()) s.policies()->begin_batch(s.pos0, s.n_tok);
    s.cache().begin_batch(s.pos0, s.n_tok);
  }

  // A policy reading the attention-input norms gets every row's; else they are made pass by pass.
  whole_norms_ = std::any_of(slices_.begin(), slices_.end(), [](const Slice& s) {
    return s.policies() && s.policies()->reads_normed_input();
  });
  if (whole_norms_) xn_.resize(std::max(xn_.size(), n_rows * d));
  for (size_t l = 0; l < c.n_layers; ++l) {
    if (whole_norms_) rms_norm_rows(x_.data(), model_.layers()[l].attn_norm, xn_.data(), n_rows);
    for (Slice& s : slices_) plan_layer(s, l);  // s.rows: which tokens run which step
    attention_block(l);  // x += O(attention) for each slice's rows.attn; K/V of rows.kv cached
    ffn_block(l);        // x += FFN(RMSNorm(x)) for rows.ffn
  }
  for (const Slice& s : slices_) s.cache().set_size(s.pos0 + s.n_tok);
  output_logits(on_logits);
}

// The logits asked for, kMaxLogitRows rows per output projection over all slices.
void ForwardPass::output_logits(const LogitsSink& on_logits) {
  const size_t d = model_.config().n_embd, n_vocab = model_.config().n_vocab;
  logit_rows_.clear();
  for (uint32_t i = 0; i < slices_.size(); ++i)
    for (size_t r = slices_[i].first_logit_row; r < slices_[i].n_tok; ++r)
      logit_rows_.push_back({i, static_cast<uint32_t>(r)});
  for (size_t at = 0; at < logit_rows_.size(); at += kMaxLogitRows) {
    const size_t n = std::min(kMaxLogitRows, logit_rows_.size() - at);
    const auto batch_row = [&](size_t i) { return slices_[logit_rows_[i].slice].row0 + logit_rows_[i].row; };
    const float* x = &x_[batch_row(at) * d];
    if (batch_row(at + n - 1) - batch_row(at) != n - 1) {  // not one run of rows: gather them
      xg_.resize(std::max(xg_.size(), n * d));
      for (size_t i = 0; i < n; ++i) std::copy_n(&x_[batch_row(at + i) * d], d, &xg_[i * d]);
      x = xg_.data();
    }
    logits_.resize(std::max(logits_.size(), n * n_vocab));
    rms_norm_rows(x, model_.output_norm(), xn_.data(), n);
    matmul(model_.output(), xn_.data(), n, logits_.data(), pool_, precision_);
    for (size_t i = 0; i < n;) {  // one slice of the sink per run of a step's rows
      size_t e = i + 1;
      while (e < n && logit_rows_[at + e].slice == logit_rows_[at + i].slice) ++e;
      on_logits(logit_rows_[at + i].slice, logit_rows_[at + i].row,
                std::span<const float>(logits_).subspan(i * n_vocab, (e - i) * n_vocab));
      i = e;
    }
  }
}

LayerInput ForwardPass::layer_input(const Slice& s, size_t layer) const {
  const size_t d = model_.config().n_embd;
  return {layer, s.pos0, s.n_tok, d, &x_[s.row0 * d], whole_norms_ ? &xn_[s.row0 * d] : nullptr};
}

void ForwardPass::plan_layer(Slice& s, size_t layer) {
  if (s.policies()) {
    s.policies()->plan_layer(layer_input(s, layer), s.rows);
  } else {
    s.rows.set_all(s.n_tok);
  }
}

ForwardPass::Gathered ForwardPass::gather(const float* src, size_t width, RowSet LayerRows::*set,
                                          size_t Slice::*first, bool Slice::*take) {
  size_t n = 0;
  for (Slice& s : slices_) {
    if (take && !(s.*take)) continue;
    s.*first = n;
    n += (s.rows.*set).size();
  }
  if (n == 0) return {nullptr, 0};  // (a slice not taken would otherwise gather its rows for nothing)
  if (slices_.size() == 1) return {(slices_[0].rows.*set).gather(src, width, xg_), n};
  xg_.resize(std::max(xg_.size(), n * width));
  for (const Slice& s : slices_)
    if (!take || s.*take) (s.rows.*set).copy_to(src + s.row0 * width, width, &xg_[s.*first * width]);
  return {xg_.data(), n};
}

void ForwardPass::compact_rows(RowSet LayerRows::*set, size_t Slice::*first, bool Slice::*take) {
  pass_rows_.clear();
  for (Slice& s : slices_) {
    if (take && !(s.*take)) continue;
    s.*first = pass_rows_.size();
    const RowSet& rows = s.rows.*set;
    for (size_t i = 0; i < rows.size(); ++i) pass_rows_.push_back(static_cast<uint32_t>(s.row0 + rows[i]));
  }
}

void ForwardPass::normed_passes(const std::vector<float>& weight,
                                const std::function<void(size_t, size_t)>& fn) {
  const ModelConfig& c = model_.config();
  const SimdOps& k = ops();
  for (size_t first = 0; first < pass_rows_.size(); first += kPassRows) {
    const size_t n = std::min(kPassRows, pass_rows_.size() - first);
    pool_.parallel_for(n, [&](size_t b, size_t e, int) {
      for (size_t i = b; i < e; ++i)
        k.rms_norm(&x_[pass_rows_[first + i] * c.n_embd], weight.data(), &xn_[i * c.n_embd], c.n_embd,
                   c.rms_eps);
    });
    fn(first, n);
  }
}

void ForwardPass::add_pass(size_t first, size_t n) {
  scatter_add_rows(xn_.data(), std::span(pass_rows_).subspan(first, n), model_.config().n_embd, x_.data());
}

void ForwardPass::for_attention_inputs(size_t layer, RowSet LayerRows::*set, size_t Slice::*first,
                                       bool Slice::*take,
                                       const std::function<void(size_t, size_t, const float*)>& fn) {
  if (whole_norms_) {
    const Gathered x = gather(xn_.data(), model_.config().n_embd, set, first, take);
    if (x.n > 0) fn(0, x.n, x.rows);
    return;
  }
  compact_rows(set, first, take);
  normed_passes(model_.layers()[layer].attn_norm, [&](size_t at, size_t n) { fn(at, n, xn_.data()); });
}

void ForwardPass::attention_block(size_t layer) {
  const ModelConfig& c = model_.config();
  const LayerWeights& L = model_.layers()[layer];
  const size_t qd = c.q_dim;
  for (Slice& s : slices_) {
    PolicyStack* p = s.policies();
    s.skips = p && p->skips_attention(layer);
    s.skip_reads_q = s.skips && p->skips_by_queries(layer);
    // K and V of the kv rows, with Q in the same product when the same tokens need it (dense
    // layers) or when the policy deciding attention skips reads every row's query.
    s.fused_qkv = s.rows.attn == s.rows.kv && (!s.skips || s.skip_reads_q) && !s.rows.idle();
    s.kv_decided = p && p->decides_kv(layer);
  }
  project_kv(layer);
  for (Slice& s : slices_) {
    if (s.rows.idle()) {  // the whole layer is skipped (SLEB), K/V too
      s.cache().commit(layer, s.pos0, s.n_tok);
      s.cache().hold_only(layer, s.pos0, {});
      continue;
    }
    // Policies that look at the rotated keys (and queries) before they are stored get them first.
    if (s.kv_decided) {
      const size_t kv = s.cache().kv_dim();
      position_rows(&k_[s.kv0 * kv], s, s.rows.kv, layer, Heads::Keys);
      if (s.skip_reads_q) position_rows(&q_[s.q0 * qd], s, s.rows.kv, layer, Heads::Queries);
      const KvRows written{
          layer,      s.pos0,          &s.rows.kv,      kv,
          c.head_dim, &k_[s.kv0 * kv], &v_[s.kv0 * kv], s.skip_reads_q ? &q_[s.q0 * qd] : nullptr,
          c.n_heads,  &pool_};
      s.policies()->decide_kv(layer_input(s, layer), written, s.rows, s.kv_storage);
    }
    rope_and_store(s, layer, !s.kv_decided, s.fused_qkv && !s.skip_reads_q);
  }
  project_late_queries(layer);

  // Attention of each slice's rows.attn, then O of all of them in passes of rows. Slices whose
  // attention is too small to share out (decode over a short cache) attend side by side, one
  // thread each; the others one after another, each over all threads. Either way a slice's work
  // items and their sums are the same, so its result is too.
  size_t n_attn = 0;
  side_by_side_.clear();
  for (Slice& s : slices_) {
    s.attn0 = n_attn;
    if (s.rows.attn.empty()) continue;  // idle layers included
    n_attn += s.rows.attn.size();
    if (s.fused_qkv && s.rows.attn.size() < s.rows.kv.size()) {
      // the queries of the rows left attending, compacted in order
      for (size_t i = 0; i < s.rows.attn.size(); ++i) {
        const size_t from = s.rows.kv.index_of(s.rows.attn[i]);
        if (from != i) std::copy_n(&q_[(s.q0 + from) * qd], qd, &q_[(s.q0 + i) * qd]);
      }
    }
    PolicyStack* p = s.policies();
    if (p && p->observes_queries(layer))
      p->observe_queries(
          {layer, s.pos0, &s.rows.attn, c.n_heads, c.head_dim, &q_[s.q0 * qd], &s.cache(), &pool_});
    if (p && (p->key_selector(layer) || p->observes_attention(layer))) {
      attend_listed(s, layer);
    } else if (s.rows.attn.size() * c.n_kv_heads * (s.pos0 + s.n_tok) < kMinSharedAttentionKeys) {
      side_by_side_.push_back(&s);
    } else {
      attend(s, layer, parts_[0], false);
    }
  }
  if (side_by_side_.size() == 1) attend(*side_by_side_[0], layer, parts_[0], false);
  if (side_by_side_.size() > 1)
    pool_.parallel_for(side_by_side_.size(), [&](size_t b, size_t e, int t) {
      for (size_t i = b; i < e; ++i) attend(*side_by_side_[i], layer, parts_[static_cast<size_t>(t)], true);
    });
  if (n_attn == 0) return;
  // Each row's attention output lies over its query in q_ (a row's last read of its query comes
  // before its output is written, so no buffer of the batch's size holds the outputs). O takes
  // them from there when every slice's rows start where O's input has them (one slice always),
  // else gathered in order into xg_ (batches of several sequences).
  const bool in_place = std::all_of(slices_.begin(), slices_.end(),
                                    [](const Slice& s) { return s.q0 == s.attn0 || s.rows.attn.empty(); });
  const float* o_in = q_.data();
  if (!in_place) {
    xg_.resize(std::max(xg_.size(), n_attn * qd));
    for (const Slice& s : slices_) std::copy_n(&q_[s.q0 * qd], s.rows.attn.size() * qd, &xg_[s.attn0 * qd]);
    o_in = xg_.data();
  }
  compact_rows(&LayerRows::attn, &Slice::attn0);
  for (size_t first = 0; first < n_attn; first += kPassRows) {
    const size_t n = std::min(kPassRows, n_attn - first);
    matmul(L.wo, o_in + first * qd, n, xn_.data(), pool_, precision_);
    if (!L.post_attn_norm.empty()) rms_norm_rows(xn_.data(), L.post_attn_norm, xn_.data(), n);
    add_pass(first, n);
  }
}

// K and V of every slice's kv rows in one product, with Q of the fused slices' rows: in the same
// product when every slice is fused (dense layers), else in a product of their own before it.
void ForwardPass::project_kv(size_t layer) {
  const ModelConfig& c = model_.config();
  const LayerWeights& L = model_.layers()[layer];
  const size_t qd = c.q_dim, kv = c.kv_dim();
  const bool all_fused = std::all_of(slices_.begin(), slices_.end(),
                                     [](const Slice& s) { return s.fused_qkv || s.rows.idle(); });
  if (!all_fused)
    for_attention_inputs(layer, &LayerRows::kv, &Slice::q0, &Slice::fused_qkv,
                         [&](size_t first, size_t n, const float* x) {
                           matmul(L.wq, x, n, &q_[first * qd], pool_, precision_);
                         });
  size_t n_kv = 0;
  for_attention_inputs(layer, &LayerRows::kv, &Slice::kv0, nullptr,
                       [&](size_t first, size_t n, const float* x) {
                         float *q = &q_[first * qd], *k = &k_[first * kv], *v = &v_[first * kv];
                         if (all_fused) {
                           matmul_many({{&L.wq, q}, {&L.wk, k}, {&L.wv, v}}, x, n, pool_, precision_);
                         } else {
                           matmul_many({{&L.wk, k}, {&L.wv, v}}, x, n, pool_, precision_);
                         }
                         n_kv += n;
                       });
  if (n_kv == 0) return;
  if (all_fused)
    for (Slice& s : slices_) s.q0 = s.kv0;
  if (!c.traits.qkv_bias) return;
  for (const Slice& s : slices_) {
    if (s.fused_qkv) add_bias(&q_[s.q0 * qd], L.bq, s.rows.kv.size());
    add_bias(&k_[s.kv0 * kv], L.bk, s.rows.kv.size());
    add_bias(&v_[s.kv0 * kv], L.bv, s.rows.kv.size());
  }
}

// Q of the slices whose attending rows were not projected with K/V (they are known only once the
// policies decided on K/V), after the fused slices' queries in q_.
void ForwardPass::project_late_queries(size_t layer) {
  const ModelConfig& c = model_.config();
  const LayerWeights& L = model_.layers()[layer];
  const size_t qd = c.q_dim;
  size_t q_end = 0;
  for (const Slice& s : slices_)
    if (s.fused_qkv) q_end = std::max(q_end, s.q0 + s.rows.kv.size());
  for (Slice& s : slices_) s.late_q = !s.fused_qkv && !s.rows.attn.empty();
  size_t n_late = 0;
  for_attention_inputs(layer, &LayerRows::attn, &Slice::q0, &Slice::late_q,
                       [&](size_t first, size_t n, const float* x) {
                         matmul(L.wq, x, n, &q_[(q_end + first) * qd], pool_, precision_);
                         n_late += n;
                       });
  if (n_late == 0) return;
  for (Slice& s : slices_) {
    if (!s.late_q) continue;
    s.q0 += q_end;
    if (c.traits.qkv_bias) add_bias(&q_[s.q0 * qd], L.bq, s.rows.attn.size());
    position_rows(&q_[s.q0 * qd], s, s.rows.attn, layer, Heads::Queries);
  }
}

void ForwardPass::ffn_block(size_t layer) {
  const ModelConfig& c = model_.config();
  const LayerWeights& L = model_.layers()[layer];
  const auto activation = c.traits.ffn == FfnActivation::GeluTanh ? ops().gelu_mul : ops().silu_mul;
  compact_rows(&LayerRows::ffn, &Slice::ffn0);
  normed_passes(L.ffn_norm, [&](size_t first, size_t n) {
    float* rows = xn_.data();  // the pass's output overwrites its own, consumed, inputs
    matmul_many({{&L.w_gate, gate_.data()}, {&L.w_up, up_.data()}}, rows, n, pool_, precision_);
    pool_.parallel_for(n, [&](size_t b, size_t e, int) {
      // Row by row: results must not depend on how tokens are split across threads.
      for (size_t t = b; t < e; ++t) activation(&gate_[t * c.n_ff], &up_[t * c.n_ff], c.n_ff);
    });
    matmul(L.w_down, gate_.data(), n, rows, pool_, precision_);
    if (!L.post_ffn_norm.empty()) rms_norm_rows(rows, L.post_ffn_norm, rows, n);
    add_pass(first, n);
  });
}

void ForwardPass::rms_norm_rows(const float* x, const std::vector<float>& weight, float* y, size_t n_rows) {
  const ModelConfig& c = model_.config();
  const SimdOps& k = ops();
  pool_.parallel_for(n_rows, [&](size_t b, size_t e, int) {
    for (size_t t = b; t < e; ++t)
      k.rms_norm(x + t * c.n_embd, weight.data(), y + t * c.n_embd, c.n_embd, c.rms_eps);
  });
}

// The last stage of Q or K, after the projection and bias: RMSNorm of each head (Qwen3, Gemma 3),
// then the rotation with layer's RoPE tables of batch row `batch_row` (every token keeps its
// original position, whichever tokens run).
void ForwardPass::position_row(float* x, size_t batch_row, size_t layer, Heads heads) const {
  const ModelConfig& c = model_.config();
  const LayerWeights& L = model_.layers()[layer];
  const std::vector<float>& norm = heads == Heads::Queries ? L.q_norm : L.k_norm;
  const size_t n_heads = heads == Heads::Queries ? c.n_heads : c.n_kv_heads, rope = c.layers[layer].rope;
  const float* cos_t = &rope_cos_[rope][batch_row * c.rot_dim];
  const float* sin_t = &rope_sin_[rope][batch_row * c.rot_dim];
  for (size_t h = 0; h < n_heads; ++h) {
    float* head = x + h * c.head_dim;
    if (!norm.empty()) ops().rms_norm(head, norm.data(), head, c.head_dim, c.rms_eps);
    ops().rope(head, cos_t, sin_t, c.rot_dim, c.traits.rope_layout == RopeLayout::Neox);
  }
}

// position_row of compact rows x (row i is slice row rows[i]).
void ForwardPass::position_rows(float* x, const Slice& s, const RowSet& rows, size_t layer, Heads heads) {
  const ModelConfig& c = model_.config();
  const size_t stride = heads == Heads::Queries ? c.q_dim : c.kv_dim();
  pool_.parallel_for(rows.size(), [&](size_t b, size_t e, int) {
    for (size_t i = b; i < e; ++i) position_row(x + i * stride, s.row0 + rows[i], layer, heads);
  });
}

// One pass over a slice's kv rows: K's and Q's last stage (position_row) on K (rotate_k) and on Q
// (rotate_q: Q rows are the K/V rows), then the cache write of every row not dropped (the policies' storage
// when they decided it, else the default). First the cache learns which of the batch's positions this
// layer holds, which gives each its slot.
void ForwardPass::rope_and_store(Slice& s, size_t layer, bool rotate_k, bool rotate_q) {
  const ModelConfig& c = model_.config();
  const size_t qd = c.q_dim;
  KvCache& cache = s.cache();
  const size_t kv = cache.kv_dim();
  const RowSet& rows = s.rows.kv;
  const KvStorage* storage = s.kv_decided ? s.kv_storage.data() : nullptr;
  const auto dropped = [&](size_t i) { return storage && storage[i] == KvStorage::Dropped; };
  stored_positions_.clear();
  for (size_t i = 0; i < rows.size(); ++i)
    if (!dropped(i)) stored_positions_.push_back(static_cast<uint32_t>(s.pos0 + rows[i]));
  if (stored_positions_.size() == s.n_tok) {
    cache.hold_all(layer, s.pos0, s.n_tok);
  } else {
    cache.hold_only(layer, s.pos0, stored_positions_);
  }
  pool_.parallel_for(rows.size(), [&](size_t b, size_t e, int) {
    for (size_t i = b; i < e; ++i) {
      if (rotate_q) position_row(&q_[(s.q0 + i) * qd], s.row0 + rows[i], layer, Heads::Queries);
      if (rotate_k) position_row(&k_[(s.kv0 + i) * kv], s.row0 + rows[i], layer, Heads::Keys);
      if (dropped(i)) continue;
      cache.store(layer, s.pos0 + rows[i], &k_[(s.kv0 + i) * kv], &v_[(s.kv0 + i) * kv],
                  storage ? storage[i] : KvStorage::Default);
    }
  });
  cache.commit(layer, s.pos0, s.n_tok);
}

}  // namespace ts
