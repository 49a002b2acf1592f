#pragma once
// The TokenButler predictor (paper 001, note §2.2): from the input of the LLM's layer-0 attention
// (RMSNorm_0 of the embeddings) it predicts, for every LLM layer >= first_layer and query head, a
// low-dimensional importance query and key per token whose dot product / sqrt(d) imitates that
// head's pre-softmax attention logits.
//
//   z = x W_in (E -> E/8);  q, k, v = z Wq, z Wk, z Wv;  RoPE(q, k) per head of size a = E/8 / H
//   o = LayerNorm(causal softmax(q k^T / sqrt(a)) v)            (no output projection)
//   x' = x + W_down GELU(W_up o + b_up) + b_down                  (back to E, residual)
//   q_imp = W_q2 SiLU(W_q1 x'),  k_imp = W_k2 SiLU(W_k1 x')       (E -> I -> layers * heads * d)
//   RoPE(q_imp, k_imp) per (layer, head), score = q_imp · k_imp / sqrt(d)
//
// RoPE uses the LLM's base and the rotate-half pairing (the authors' results commit: no scaling).
// Differences from the authors' code: the unused layer-0 slot and the unused second LayerNorm are
// not stored, and the FFN's training dropout is left out (deterministic, bit-identical resume).
// Everything is float32. Forward runs a batch of rows after any cached earlier positions (decode
// and training share it); backward is for a batch that starts a sequence (training).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/simd_ops.h"

namespace ts {

struct ButlerConfig {
  uint32_t n_embd = 0;         // E, the LLM's hidden size
  uint32_t n_reduced = 0;      // E / 8
  uint32_t n_heads = 0;        // heads of the predictor's attention (the LLM's query heads)
  uint32_t n_layers = 0;       // the LLM's layers
  uint32_t first_layer = 1;    // first LLM layer predicted (layer 0 stays dense)
  uint32_t n_query_heads = 0;  // the LLM's query heads
  uint32_t imp_dim = 16;       // d
  uint32_t inter = 128;        // I, hidden width of the importance nets
  float rope_base = 10000.0f;

  size_t head_size() const { return n_reduced / n_heads; }
  size_t n_slots() const { return size_t{n_layers - first_layer} * n_query_heads; }  // (layer, head) pairs
  size_t n_out() const { return n_slots() * imp_dim; }
  // The slot of LLM layer `layer` (>= first_layer), query head `head`.
  size_t slot(size_t layer, size_t head) const { return (layer - first_layer) * n_query_heads + head; }
  void check() const;  // throws ts::Error on inconsistent shapes
};

struct ButlerWeights {
  ButlerConfig config;
  std::vector<float> w_in, wq, wk, wv;  // [out][in]
  std::vector<float> ln_gain, ln_bias;  // E/8
  std::vector<float> up, up_bias;       // [2E/8][E/8], 2E/8
  std::vector<float> down, down_bias;   // [E][2E/8], E
  std::vector<float> q_hidden, q_out;   // [I][E], [n_out][I]
  std::vector<float> k_hidden, k_out;

  // Every tensor with its name and shape (rows, cols; cols 1 for vectors), in file order.
  void for_each(const std::function<void(const char*, size_t, size_t, std::vector<float>&)>& f);
  void for_each(const std::function<void(const char*, size_t, size_t, const std::vector<float>&)>& f) const;
  size_t n_params() const;
  // Zero tensors of the config's shapes.
  static ButlerWeights zeros(const ButlerConfig& config);
  // Paper 001's init: xavier-uniform matrices, zero biases, LayerNorm gain 1.
  static ButlerWeights init(const ButlerConfig& config, uint64_t seed);
};

// Keys and values of the predictor's attention for the positions seen so far, post-RoPE.
struct ButlerCache {
  std::vector<float> k, v;  // [pos][E/8]
  size_t size(const ButlerConfig& c) const { return k.size() / c.n_reduced; }
  void truncate(size_t n, const ButlerConfig& c) {
    k.resize(n * c.n_reduced);
    v.resize(n * c.n_reduced);
  }
};

// Activations of one forward batch (rows at positions pos0..), kept for backward.
struct ButlerActs {
  size_t n = 0, pos0 = 0;
  std::vector<float> z, q, o_raw, ln_hat, ln_rstd, o, up_pre, up_act, x_res;
  std::vector<float> probs;                           // [head][row][pos0 + n]
  std::vector<float> qh_pre, qh_act, kh_pre, kh_act;  // importance nets' hidden layer, [n][I]
  std::vector<float> q_imp, k_imp;                    // [n][n_out], post-RoPE
};

class ButlerNet {
 public:
  ButlerNet(const ButlerWeights& weights, const SimdOps& ops);

  // Rows x[0..n) (E floats each) at positions cache.size()..; appends their K/V to the cache.
  // for_backward: keep every attention probability (training); else only the outputs matter.
  void forward(const float* x, size_t n, ButlerCache& cache, ButlerActs& a, bool for_backward = true) const;
  // Gradients of a batch that started at position 0, given d loss / d q_imp and d k_imp ([n][n_out]):
  // adds to grad. d_q_imp and d_k_imp are modified (RoPE undone in place).
  void backward(const float* x, const ButlerCache& cache, const ButlerActs& a, float* d_q_imp, float* d_k_imp,
                ButlerWeights& grad) const;

 private:
  void rope_rows(float* x, size_t n, size_t pos0, size_t width, size_t dim, bool inverse) const;

  const ButlerWeights& w_;
  const SimdOps& k_;
  std::vector<float> inv_freq_head_, inv_freq_imp_;
};

// y[n][out] = x[n][in] W^T (+ bias)
void linear_forward(const SimdOps& k, const std::vector<float>& w, const float* x, size_t n, size_t in,
                    size_t out, float* y, const std::vector<float>* bias = nullptr);
// dx[n][in] = dy W (dx may be nullptr); dW += dy^T x; dbias += sum dy (when given).
void linear_backward(const SimdOps& k, const std::vector<float>& w, const float* x, const float* dy, size_t n,
                     size_t in, size_t out, float* dx, std::vector<float>& dw,
                     std::vector<float>* dbias = nullptr);

}  // namespace ts
