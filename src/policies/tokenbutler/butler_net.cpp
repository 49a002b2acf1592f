#include "policies/tokenbutler/butler_net.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/error.h"
#include "kernels/elementwise.h"

namespace ts {
namespace {

constexpr float kLayerNormEps = 1e-5f;

std::vector<float> rope_inv_freq(size_t dim, float base) {
  std::vector<float> f(dim / 2);
  for (size_t i = 0; i < f.size(); ++i)
    f[i] = static_cast<float>(std::pow(double{base}, -2.0 * double(i) / double(dim)));
  return f;
}

void transpose(const float* a, size_t rows, size_t cols, std::vector<float>& out) {
  out.resize(rows * cols);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) out[c * rows + r] = a[r * cols + c];
}

float gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * float(M_SQRT1_2))); }
float gelu_grad(float x) {
  return 0.5f * (1.0f + std::erf(x * float(M_SQRT1_2))) + x * std::exp(-0.5f * x * x) * 0.3989422804f;
}
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

void ButlerConfig::check() const {
  TS_CHECK(n_embd > 0 && n_reduced > 0 && n_heads > 0 && n_reduced % n_heads == 0 && head_size() % 2 == 0,
           "TokenButler config: E/8 = ", n_reduced, " must split into ", n_heads, " heads of even size");
  TS_CHECK(imp_dim > 0 && imp_dim % 2 == 0 && inter > 0 && n_query_heads > 0 && first_layer < n_layers,
           "TokenButler config: bad d = ", imp_dim, ", I = ", inter, " or layers ", first_layer, "..",
           n_layers);
}

void ButlerWeights::for_each(const std::function<void(const char*, size_t, size_t, std::vector<float>&)>& f) {
  const ButlerConfig& c = config;
  const size_t e = c.n_embd, r = c.n_reduced, i = c.inter, o = c.n_out();
  f("attn.in", r, e, w_in);
  f("attn.q", r, r, wq);
  f("attn.k", r, r, wk);
  f("attn.v", r, r, wv);
  f("attn.norm.weight", r, 1, ln_gain);
  f("attn.norm.bias", r, 1, ln_bias);
  f("ffn.up.weight", 2 * r, r, up);
  f("ffn.up.bias", 2 * r, 1, up_bias);
  f("ffn.down.weight", e, 2 * r, down);
  f("ffn.down.bias", e, 1, down_bias);
  f("imp_q.hidden", i, e, q_hidden);
  f("imp_q.out", o, i, q_out);
  f("imp_k.hidden", i, e, k_hidden);
  f("imp_k.out", o, i, k_out);
}

void ButlerWeights::for_each(
    const std::function<void(const char*, size_t, size_t, const std::vector<float>&)>& f) const {
  const_cast<ButlerWeights*>(this)->for_each(
      [&](const char* name, size_t rows, size_t cols, std::vector<float>& t) { f(name, rows, cols, t); });
}

size_t ButlerWeights::n_params() const {
  size_t n = 0;
  for_each([&](const char*, size_t rows, size_t cols, const std::vector<float>&) { n += rows * cols; });
  return n;
}

ButlerWeights ButlerWeights::zeros(const ButlerConfig& config) {
  config.check();
  ButlerWeights w;
  w.config = config;
  w.for_each(
      [](const char*, size_t rows, size_t cols, std::vector<float>& t) { t.assign(rows * cols, 0.0f); });
  return w;
}

ButlerWeights ButlerWeights::init(const ButlerConfig& config, uint64_t seed) {
  ButlerWeights w = zeros(config);
  std::mt19937_64 rng(seed);
  w.for_each([&](const char*, size_t rows, size_t cols, std::vector<float>& t) {
    if (cols == 1) return;  // biases 0
    const float bound = std::sqrt(6.0f / static_cast<float>(rows + cols));
    std::uniform_real_distribution<float> u(-bound, bound);
    for (float& x : t) x = u(rng);
  });
  std::fill(w.ln_gain.begin(), w.ln_gain.end(), 1.0f);
  return w;
}

void linear_forward(const SimdOps& k, const std::vector<float>& w, const float* x, size_t n, size_t in,
                    size_t out, float* y, const std::vector<float>* bias) {
  k.gemm_f32(w.data(), out, x, in, n, in, y, out);
  if (bias)
    for (size_t t = 0; t < n; ++t)
      for (size_t o = 0; o < out; ++o) y[t * out + o] += (*bias)[o];
}

void linear_backward(const SimdOps& k, const std::vector<float>& w, const float* x, const float* dy, size_t n,
                     size_t in, size_t out, float* dx, std::vector<float>& dw, std::vector<float>* dbias) {
  thread_local std::vector<float> wt, xt, dyt, dwt;
  if (dx) {
    transpose(w.data(), out, in, wt);
    k.gemm_f32(wt.data(), in, dy, out, n, out, dx, in);
  }
  transpose(x, n, in, xt);
  transpose(dy, n, out, dyt);
  dwt.resize(out * in);
  k.gemm_f32(xt.data(), in, dyt.data(), n, out, n, dwt.data(), in);  // dwt[o][i] = sum_t x[t][i] dy[t][o]
  for (size_t j = 0; j < out * in; ++j) dw[j] += dwt[j];
  if (dbias)
    for (size_t o = 0; o < out; ++o)
      for (size_t t = 0; t < n; ++t) (*dbias)[o] += dy[t * out + o];
}

ButlerNet::ButlerNet(const ButlerWeights& weights, const SimdOps& ops)
    : w_(weights),
      k_(ops),
      inv_freq_head_(rope_inv_freq(weights.config.head_size(), weights.config.rope_base)),
      inv_freq_imp_(rope_inv_freq(weights.config.imp_dim, weights.config.rope_base)) {
  weights.config.check();
}

// RoPE (rotate-half pairing) on every `dim`-wide head of rows of `width` floats; inverse: the
// transposed rotation, which backward applies to gradients.
void ButlerNet::rope_rows(float* x, size_t n, size_t pos0, size_t width, size_t dim, bool inverse) const {
  const std::vector<float>& inv_freq = dim == w_.config.imp_dim ? inv_freq_imp_ : inv_freq_head_;
  std::vector<float> cos_t(dim), sin_t(dim);
  for (size_t t = 0; t < n; ++t) {
    rope_tables(static_cast<float>(pos0 + t), inv_freq.data(), dim, RopeLayout::Neox, cos_t.data(),
                sin_t.data());
    if (inverse)
      for (float& s : sin_t) s = -s;
    for (size_t h = 0; h < width / dim; ++h)
      k_.rope(x + t * width + h * dim, cos_t.data(), sin_t.data(), dim, true);
  }
}

void ButlerNet::forward(const float* x, size_t n, ButlerCache& cache, ButlerActs& a,
                        bool for_backward) const {
  const ButlerConfig& c = w_.config;
  const size_t e = c.n_embd, r = c.n_reduced, hs = c.head_size(), o = c.n_out(), I = c.inter;
  const size_t p0 = cache.size(c), total = p0 + n;
  a.n = n;
  a.pos0 = p0;
  a.z.resize(n * r);
  a.q.resize(n * r);
  linear_forward(k_, w_.w_in, x, n, e, r, a.z.data());
  linear_forward(k_, w_.wq, a.z.data(), n, r, r, a.q.data());
  cache.k.resize(total * r);
  cache.v.resize(total * r);
  float* kn = &cache.k[p0 * r];
  linear_forward(k_, w_.wk, a.z.data(), n, r, r, kn);
  linear_forward(k_, w_.wv, a.z.data(), n, r, r, &cache.v[p0 * r]);
  rope_rows(a.q.data(), n, p0, r, hs, false);
  rope_rows(kn, n, p0, r, hs, false);

  // Causal attention per head; probabilities kept for backward.
  if (for_backward) {
    a.probs.assign(c.n_heads * n * total, 0.0f);
  } else {
    a.probs.resize(c.n_heads * total);  // rows' scores only, each written before it is read
  }
  a.o_raw.assign(n * r, 0.0f);
  // Every head at once per cached row: the heads are narrow (E/8 / H, 8 for SmolLM2), so a row
  // of E/8 keys or values is read once and summed per head, not once per head with a dot call.
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  std::vector<float*> p(c.n_heads);
  thread_local std::vector<float> weights;
  weights.resize(r);
  for (size_t i = 0; i < n; ++i) {
    for (size_t h = 0; h < c.n_heads; ++h)
      p[h] = for_backward ? &a.probs[(h * n + i) * total] : &a.probs[h * total];
    const float* qi = &a.q[i * r];
    const size_t n_keys = p0 + i + 1;
    for (size_t j = 0; j < n_keys; ++j) {
      const float* kj = &cache.k[j * r];
      for (size_t h = 0; h < c.n_heads; ++h) {
        float s = 0.0f;
        for (size_t x2 = 0; x2 < hs; ++x2) s += qi[h * hs + x2] * kj[h * hs + x2];
        p[h][j] = scale * s;
      }
    }
    for (size_t h = 0; h < c.n_heads; ++h) k_.softmax(p[h], n_keys);
    float* out = &a.o_raw[i * r];
    for (size_t j = 0; j < n_keys; ++j) {
      const float* vj = &cache.v[j * r];
      for (size_t h = 0; h < c.n_heads; ++h)
        for (size_t x2 = 0; x2 < hs; ++x2) weights[h * hs + x2] = p[h][j];
      for (size_t x2 = 0; x2 < r; ++x2) out[x2] += weights[x2] * vj[x2];
    }
  }

  // LayerNorm(E/8) with affine.
  a.ln_hat.resize(n * r);
  a.ln_rstd.resize(n);
  a.o.resize(n * r);
  for (size_t i = 0; i < n; ++i) {
    const float* v = &a.o_raw[i * r];
    float mean = 0.0f, var = 0.0f;
    for (size_t j = 0; j < r; ++j) mean += v[j];
    mean /= static_cast<float>(r);
    for (size_t j = 0; j < r; ++j) var += (v[j] - mean) * (v[j] - mean);
    const float rstd = 1.0f / std::sqrt(var / static_cast<float>(r) + kLayerNormEps);
    a.ln_rstd[i] = rstd;
    for (size_t j = 0; j < r; ++j) {
      const float hat = (v[j] - mean) * rstd;
      a.ln_hat[i * r + j] = hat;
      a.o[i * r + j] = hat * w_.ln_gain[j] + w_.ln_bias[j];
    }
  }

  // FFN back to E, residual.
  a.up_pre.resize(n * 2 * r);
  a.up_act.resize(n * 2 * r);
  linear_forward(k_, w_.up, a.o.data(), n, r, 2 * r, a.up_pre.data(), &w_.up_bias);
  for (size_t j = 0; j < n * 2 * r; ++j) a.up_act[j] = gelu(a.up_pre[j]);
  a.x_res.resize(n * e);
  linear_forward(k_, w_.down, a.up_act.data(), n, 2 * r, e, a.x_res.data(), &w_.down_bias);
  for (size_t j = 0; j < n * e; ++j) a.x_res[j] += x[j];

  // The importance nets.
  const auto net = [&](const std::vector<float>& hidden, const std::vector<float>& out_w,
                       std::vector<float>& pre, std::vector<float>& act, std::vector<float>& y) {
    pre.resize(n * I);
    act.resize(n * I);
    y.resize(n * o);
    linear_forward(k_, hidden, a.x_res.data(), n, e, I, pre.data());
    for (size_t j = 0; j < n * I; ++j) act[j] = pre[j] * sigmoid(pre[j]);
    linear_forward(k_, out_w, act.data(), n, I, o, y.data());
    rope_rows(y.data(), n, p0, o, c.imp_dim, false);
  };
  net(w_.q_hidden, w_.q_out, a.qh_pre, a.qh_act, a.q_imp);
  net(w_.k_hidden, w_.k_out, a.kh_pre, a.kh_act, a.k_imp);
}

void ButlerNet::backward(const float* x, const ButlerCache& cache, const ButlerActs& a, float* d_q_imp,
                         float* d_k_imp, ButlerWeights& g) const {
  const ButlerConfig& c = w_.config;
  const size_t n = a.n, e = c.n_embd, r = c.n_reduced, hs = c.head_size(), o = c.n_out(), I = c.inter;
  TS_CHECK(a.pos0 == 0, "TokenButler backward: the batch must start the sequence");

  // Importance nets, both feeding d x_res.
  std::vector<float> d_res(n * e, 0.0f), d_act(n * I), d_in(n * e);
  const auto net = [&](const std::vector<float>& hidden, const std::vector<float>& out_w,
                       std::vector<float>& g_hidden, std::vector<float>& g_out, const std::vector<float>& pre,
                       const std::vector<float>& act, float* dy) {
    rope_rows(dy, n, 0, o, c.imp_dim, true);
    linear_backward(k_, out_w, act.data(), dy, n, I, o, d_act.data(), g_out);
    for (size_t j = 0; j < n * I; ++j) {
      const float s = sigmoid(pre[j]);
      d_act[j] *= s * (1.0f + pre[j] * (1.0f - s));
    }
    linear_backward(k_, hidden, a.x_res.data(), d_act.data(), n, e, I, d_in.data(), g_hidden);
    for (size_t j = 0; j < n * e; ++j) d_res[j] += d_in[j];
  };
  net(w_.q_hidden, w_.q_out, g.q_hidden, g.q_out, a.qh_pre, a.qh_act, d_q_imp);
  net(w_.k_hidden, w_.k_out, g.k_hidden, g.k_out, a.kh_pre, a.kh_act, d_k_imp);

  // FFN.
  std::vector<float> d_up(n * 2 * r), d_o(n * r);
  linear_backward(k_, w_.down, a.up_act.data(), d_res.data(), n, 2 * r, e, d_up.data(), g.down, &g.down_bias);
  for (size_t j = 0; j < n * 2 * r; ++j) d_up[j] *= gelu_grad(a.up_pre[j]);
  linear_backward(k_, w_.up, a.o.data(), d_up.data(), n, r, 2 * r, d_o.data(), g.up, &g.up_bias);

  // LayerNorm.
  std::vector<float> d_raw(n * r);
  for (size_t i = 0; i < n; ++i) {
    float mean_d = 0.0f, mean_dh = 0.0f;
    for (size_t j = 0; j < r; ++j) {
      const float dy = d_o[i * r + j], hat = a.ln_hat[i * r + j];
      g.ln_gain[j] += dy * hat;
      g.ln_bias[j] += dy;
      const float dh = dy * w_.ln_gain[j];
      mean_d += dh;
      mean_dh += dh * hat;
    }
    mean_d /= static_cast<float>(r);
    mean_dh /= static_cast<float>(r);
    for (size_t j = 0; j < r; ++j) {
      const float dh = d_o[i * r + j] * w_.ln_gain[j];
      d_raw[i * r + j] = a.ln_rstd[i] * (dh - mean_d - a.ln_hat[i * r + j] * mean_dh);
    }
  }

  // Attention: probabilities P, scores S = q k^T * scale.
  std::vector<float> dq(n * r, 0.0f), dk(n * r, 0.0f), dv(n * r, 0.0f), dp(n);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (size_t h = 0; h < c.n_heads; ++h)
    for (size_t i = 0; i < n; ++i) {
      const float* p = &a.probs[(h * n + i) * n];
      const float* dout = &d_raw[i * r + h * hs];
      float dot_pd = 0.0f;
      for (size_t j = 0; j <= i; ++j) {
        dp[j] = k_.dot_f32(dout, &cache.v[j * r + h * hs], hs);
        dot_pd += p[j] * dp[j];
        for (size_t x2 = 0; x2 < hs; ++x2) dv[j * r + h * hs + x2] += p[j] * dout[x2];
      }
      for (size_t j = 0; j <= i; ++j) {
        const float ds = p[j] * (dp[j] - dot_pd) * scale;
        for (size_t x2 = 0; x2 < hs; ++x2) {
          dq[i * r + h * hs + x2] += ds * cache.k[j * r + h * hs + x2];
          dk[j * r + h * hs + x2] += ds * a.q[i * r + h * hs + x2];
        }
      }
    }
  rope_rows(dq.data(), n, 0, r, hs, true);
  rope_rows(dk.data(), n, 0, r, hs, true);

  std::vector<float> dz(n * r), dz_part(n * r);
  linear_backward(k_, w_.wq, a.z.data(), dq.data(), n, r, r, dz.data(), g.wq);
  linear_backward(k_, w_.wk, a.z.data(), dk.data(), n, r, r, dz_part.data(), g.wk);
  for (size_t j = 0; j < n * r; ++j) dz[j] += dz_part[j];
  linear_backward(k_, w_.wv, a.z.data(), dv.data(), n, r, r, dz_part.data(), g.wv);
  for (size_t j = 0; j < n * r; ++j) dz[j] += dz_part[j];
  linear_backward(k_, w_.w_in, x, dz.data(), n, e, r, nullptr, g.w_in);
}

}  // namespace ts
