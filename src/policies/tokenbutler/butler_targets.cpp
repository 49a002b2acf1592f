#include "policies/tokenbutler/butler_targets.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/error.h"
#include "model/model.h"
#include "runtime/kv_cache.h"

namespace ts {

void AttentionCapture::bind(const Model& model) {
  n_layers_ = model.config().n_layers;
  n_embd_ = model.config().n_embd;
  TS_CHECK(first_layer_ < n_layers_, "attention capture: first layer ", first_layer_, " of ", n_layers_);
  queries_.assign(n_layers_, {});
}

std::vector<HookClaim> AttentionCapture::claims() const {
  std::vector<uint32_t> layers;
  for (uint32_t l = first_layer_; l < n_layers_; ++l) layers.push_back(l);
  return {{Hook::ObserveQueries, layers}, {Hook::ObserveLayerInput, {0}}};
}

void AttentionCapture::observe_layer_input(const LayerInput& in) {
  input_.resize((in.pos0 + in.n_tok) * in.dim);
  std::copy(in.normed, in.normed + in.n_tok * in.dim,
            input_.begin() + static_cast<std::ptrdiff_t>(in.pos0 * in.dim));
}

void AttentionCapture::observe_queries(const QueryRows& q) {
  const size_t width = q.n_heads * q.head_dim;
  std::vector<float>& out = queries_[q.layer];
  for (size_t i = 0; i < q.rows->size(); ++i) {
    const size_t pos = q.pos0 + (*q.rows)[i];
    out.resize(std::max(out.size(), (pos + 1) * width));
    std::copy(q.queries + i * width, q.queries + (i + 1) * width,
              out.begin() + static_cast<std::ptrdiff_t>(pos * width));
  }
}

void run_with_capture(Transformer& tf, std::span<const int32_t> tokens) {
  tf.truncate(0);
  tf.forward_logits(tokens, tokens.size(), [](size_t, std::span<const float>) {});
}

namespace {
// One predicted (layer, head)'s logits over query rows `rows` (ascending) and every key, and the
// buffers its gradient needs; one per pool thread.
struct PairScratch {
  std::vector<float> queries, q_imp, k_imp, target, pred, grad, grad_t, imp_t, d_q_rows;
};

// The layer's keys of every KV head, [kv head][n][D], as the attention reads them (any cache format).
void layer_keys(const Transformer& tf, size_t layer, size_t n, std::vector<float>& row,
                std::vector<float>& out) {
  const ModelConfig& mc = tf.model().config();
  const size_t D = mc.head_dim, kv = tf.cache().kv_dim();
  row.resize(kv);
  out.resize(mc.n_kv_heads * n * D);
  for (size_t j = 0; j < n; ++j) {
    tf.cache().read_key(layer, j, row.data());
    for (size_t g = 0; g < mc.n_kv_heads; ++g) std::copy_n(&row[g * D], D, &out[(g * n + j) * D]);
  }
}

// target = q_i·k_j / sqrt(D) and predicted = q_imp_i·k_imp_j / sqrt(d) for i in rows, all j < n,
// [R][n] in s.target / s.pred; causal entries (j <= rows[r]) scaled, the others meaningless.
void pair_logits(const ButlerConfig& c, const ModelConfig& mc, const float* keys, const std::vector<float>& q,
                 const ButlerActs& a, size_t layer, size_t head, std::span<const uint32_t> rows,
                 PairScratch& s) {
  const SimdOps& k = ops();
  const size_t n = a.n, R = rows.size(), D = mc.head_dim, H = mc.n_heads, d = c.imp_dim, o = c.n_out();
  const size_t slot = c.slot(layer, head);
  s.queries.resize(R * D);
  s.q_imp.resize(R * d);
  s.k_imp.resize(n * d);
  for (size_t r = 0; r < R; ++r) {
    std::copy_n(&q[rows[r] * H * D + head * D], D, &s.queries[r * D]);
    std::copy_n(&a.q_imp[rows[r] * o + slot * d], d, &s.q_imp[r * d]);
  }
  for (size_t j = 0; j < n; ++j) std::copy_n(&a.k_imp[j * o + slot * d], d, &s.k_imp[j * d]);
  s.target.resize(R * n);
  s.pred.resize(R * n);
  k.gemm_f32(keys, n, s.queries.data(), D, R, D, s.target.data(), n);
  k.gemm_f32(s.k_imp.data(), n, s.q_imp.data(), d, R, d, s.pred.data(), n);
  const float t_scale = 1.0f / std::sqrt(static_cast<float>(D)),
              p_scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (size_t r = 0; r < R; ++r)
    for (size_t j = 0; j <= rows[r]; ++j) {
      s.target[r * n + j] *= t_scale;
      s.pred[r * n + j] *= p_scale;
    }
}

std::vector<uint32_t> every_row(size_t n) {
  std::vector<uint32_t> rows(n);
  for (size_t i = 0; i < n; ++i) rows[i] = static_cast<uint32_t>(i);
  return rows;
}
}  // namespace

void for_each_logit_pair(const ButlerConfig& c, const Transformer& tf, const AttentionCapture& cap,
                         const ButlerActs& a, const std::function<void(const LogitPair&)>& f) {
  const ModelConfig& mc = tf.model().config();
  const size_t n = a.n, group = mc.n_heads / mc.n_kv_heads;
  TS_CHECK(a.pos0 == 0 && tf.n_past() >= n,
           "logit pairs: the predictor batch must cover the captured sequence");
  const std::vector<uint32_t> rows = every_row(n);
  std::vector<float> row, keys;
  PairScratch s;
  for (size_t l = c.first_layer; l < c.n_layers; ++l) {
    TS_CHECK(cap.queries(l).size() >= n * mc.n_heads * mc.head_dim, "logit pairs: layer ", l,
             " queries were not captured");
    layer_keys(tf, l, n, row, keys);
    for (size_t h = 0; h < mc.n_heads; ++h) {
      pair_logits(c, mc, &keys[(h / group) * n * mc.head_dim], cap.queries(l), a, l, h, rows, s);
      f({l, h, n, s.target.data(), s.pred.data()});
    }
  }
}

std::vector<uint32_t> loss_rows(size_t n, size_t n_rows, uint64_t seed) {
  if (n_rows == 0 || n_rows >= n) return every_row(n);
  std::vector<uint32_t> all = every_row(n);
  std::mt19937_64 rng(seed);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(n_rows);
  std::sort(all.begin(), all.end());
  return all;
}

double butler_mse(const ButlerConfig& c, const Transformer& tf, const AttentionCapture& cap,
                  const ButlerActs& a, std::span<const uint32_t> rows, ThreadPool& pool, float* d_q_imp,
                  float* d_k_imp) {
  const ModelConfig& mc = tf.model().config();
  const SimdOps& k = ops();
  const size_t n = a.n, R = rows.size(), d = c.imp_dim, o = c.n_out(), H = mc.n_heads;
  const size_t group = H / mc.n_kv_heads;
  TS_CHECK(a.pos0 == 0 && tf.n_past() >= n,
           "logit MSE: the predictor batch must cover the captured sequence");
  TS_CHECK(R > 0 && std::is_sorted(rows.begin(), rows.end()) && rows.back() < n,
           "logit MSE: the loss rows must be ascending positions of the sequence");
  double entries = 0.0;
  for (uint32_t i : rows) entries += static_cast<double>(i) + 1.0;
  const double count = static_cast<double>(c.n_slots()) * entries;
  // d loss / d A[r][j] = 2 (A - T) / count on causal entries; d A / d q_imp = k_imp / sqrt(d).
  const float g_scale = static_cast<float>(2.0 / count) / std::sqrt(static_cast<float>(d));
  std::vector<PairScratch> scratch(static_cast<size_t>(pool.size()));
  std::vector<double> head_sums(H);
  std::vector<float> row, keys;
  double loss = 0.0;
  for (size_t l = c.first_layer; l < c.n_layers; ++l) {
    TS_CHECK(cap.queries(l).size() >= n * H * mc.head_dim, "logit MSE: layer ", l,
             " queries were not captured");
    layer_keys(tf, l, n, row, keys);
    // Heads write disjoint columns of d_q_imp and d_k_imp; their sums are added in head order.
    pool.parallel_for(H, [&](size_t b, size_t e, int t) {
      PairScratch& s = scratch[static_cast<size_t>(t)];
      for (size_t h = b; h < e; ++h) {
        pair_logits(c, mc, &keys[(h / group) * n * mc.head_dim], cap.queries(l), a, l, h, rows, s);
        s.grad.assign(R * n, 0.0f);
        s.grad_t.assign(n * R, 0.0f);
        double sum = 0.0;
        for (size_t r = 0; r < R; ++r)
          for (size_t j = 0; j <= rows[r]; ++j) {
            const float diff = s.pred[r * n + j] - s.target[r * n + j];
            sum += double(diff) * diff;
            s.grad[r * n + j] = s.grad_t[j * R + r] = g_scale * diff;
          }
        head_sums[h] = sum;
        const size_t slot = c.slot(l, h);
        // d q_imp_i = sum_j G[r][j] k_imp_j: rows of G times k_imp^T as the weight matrix.
        s.imp_t.resize(n * d);  // n >= R
        for (size_t j = 0; j < n; ++j)
          for (size_t x = 0; x < d; ++x) s.imp_t[x * n + j] = s.k_imp[j * d + x];
        s.d_q_rows.resize(R * d);
        k.gemm_f32(s.imp_t.data(), d, s.grad.data(), n, R, n, s.d_q_rows.data(), d);
        for (size_t r = 0; r < R; ++r) std::copy_n(&s.d_q_rows[r * d], d, d_q_imp + rows[r] * o + slot * d);
        // d k_imp_j = sum_r G[r][j] q_imp_r: rows of G^T times the sampled q_imp^T.
        for (size_t r = 0; r < R; ++r)
          for (size_t x = 0; x < d; ++x) s.imp_t[x * R + r] = s.q_imp[r * d + x];
        k.gemm_f32(s.imp_t.data(), d, s.grad_t.data(), R, n, R, d_k_imp + slot * d, o);
      }
    });
    for (double h : head_sums) loss += h;
  }
  return loss / count;
}

}  // namespace ts
