#include "policies/tokenbutler/butler_targets.h"

#include <algorithm>
#include <cmath>

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
  return {{Hook::SelectKeys, layers}, {Hook::ObserveLayerInput, {0}}};
}

void AttentionCapture::observe_layer_input(const LayerInput& in) {
  input_.resize((in.pos0 + in.n_tok) * in.dim);
  std::copy(in.normed, in.normed + in.n_tok * in.dim,
            input_.begin() + static_cast<std::ptrdiff_t>(in.pos0 * in.dim));
}

void AttentionCapture::prepare_keys(const QueryRows& q) {
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

void for_each_logit_pair(const ButlerConfig& c, const Transformer& tf, const AttentionCapture& cap,
                         const ButlerActs& a, const std::function<void(const LogitPair&)>& f) {
  const ModelConfig& mc = tf.model().config();
  const SimdOps& k = ops();
  const size_t n = a.n, D = mc.head_dim, H = mc.n_heads, group = mc.n_heads / mc.n_kv_heads, d = c.imp_dim;
  const size_t o = c.n_out();
  TS_CHECK(a.pos0 == 0 && tf.n_past() >= n,
           "logit pairs: the predictor batch must cover the captured sequence");
  const size_t kv = tf.cache().kv_dim();
  std::vector<float> rows(n * kv), keys(n * D), target(n * n), pred(n * n), k_imp(n * d);
  const float t_scale = 1.0f / std::sqrt(static_cast<float>(D)),
              p_scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (size_t l = c.first_layer; l < c.n_layers; ++l) {
    const std::vector<float>& q = cap.queries(l);
    TS_CHECK(q.size() >= n * H * D, "logit pairs: layer ", l, " queries were not captured");
    for (size_t j = 0; j < n; ++j) tf.cache().read_key(l, j, &rows[j * kv]);  // any cache format
    for (size_t h = 0; h < H; ++h) {
      if (h % group == 0)
        for (size_t j = 0; j < n; ++j) std::copy_n(&rows[j * kv + (h / group) * D], D, &keys[j * D]);
      k.gemm_f32(keys.data(), n, q.data() + h * D, H * D, n, D, target.data(), n);
      const size_t slot = c.slot(l, h);
      for (size_t j = 0; j < n; ++j) std::copy_n(&a.k_imp[j * o + slot * d], d, &k_imp[j * d]);
      k.gemm_f32(k_imp.data(), n, a.q_imp.data() + slot * d, o, n, d, pred.data(), n);
      for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j <= i; ++j) {
          target[i * n + j] *= t_scale;
          pred[i * n + j] *= p_scale;
        }
      f({l, h, n, target.data(), pred.data()});
    }
  }
}

double butler_mse(const ButlerConfig& c, const Transformer& tf, const AttentionCapture& cap,
                  const ButlerActs& a, float* d_q_imp, float* d_k_imp) {
  const SimdOps& k = ops();
  const size_t n = a.n, d = c.imp_dim, o = c.n_out();
  const double count = static_cast<double>(c.n_slots()) * static_cast<double>(n * (n + 1) / 2);
  const float p_scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> grad(n * n), grad_t(n * n), imp_t(d * n);
  double loss = 0.0;
  for_each_logit_pair(c, tf, cap, a, [&](const LogitPair& p) {
    // d loss / d A[i][j] = 2 (A - T) / count on causal entries; d A / d q_imp = k_imp / sqrt(d).
    const float g_scale = static_cast<float>(2.0 / count) * p_scale;
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j <= i; ++j) {
        const float diff = p.predicted[i * n + j] - p.target[i * n + j];
        sum += double(diff) * diff;
        grad[i * n + j] = g_scale * diff;
        grad_t[j * n + i] = g_scale * diff;
      }
      for (size_t j = i + 1; j < n; ++j) grad[i * n + j] = grad_t[j * n + i] = 0.0f;
    }
    loss += sum;
    const size_t slot = c.slot(p.layer, p.head);
    // d q_imp_i = sum_j G[i][j] k_imp_j: rows of G times k_imp^T as the weight matrix.
    for (size_t j = 0; j < n; ++j)
      for (size_t x = 0; x < d; ++x) imp_t[x * n + j] = a.k_imp[j * o + slot * d + x];
    k.gemm_f32(imp_t.data(), d, grad.data(), n, n, n, d_q_imp + slot * d, o);
    for (size_t i = 0; i < n; ++i)
      for (size_t x = 0; x < d; ++x) imp_t[x * n + i] = a.q_imp[i * o + slot * d + x];
    k.gemm_f32(imp_t.data(), d, grad_t.data(), n, n, n, d_k_imp + slot * d, o);
  });
  return loss / count;
}

}  // namespace ts
