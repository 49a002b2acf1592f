#include "model/model.h"

#include <cmath>

#include "core/error.h"
#include "kernels/packed_rows.h"

namespace ts {
namespace {

const GgufTensor& require_tensor(const GgufFile& g, const std::string& name, std::vector<uint64_t> dims) {
  const GgufTensor* t = g.find_tensor(name);
  TS_CHECK(t, g.name(), ": missing tensor ", name);
  bool ok = t->dims.size() == dims.size() ||
            (t->dims.size() > dims.size() && t->dims.back() == 1);  // trailing 1-dims are harmless
  for (size_t i = 0; ok && i < dims.size(); ++i) ok = t->dims[i] == dims[i];
  if (!ok) {
    std::string got, want;
    for (auto d : t->dims) got += cat(got.empty() ? "" : "x", d);
    for (auto d : dims) want += cat(want.empty() ? "" : "x", d);
    fail(g.name(), ": tensor ", name, " has shape ", got, ", expected ", want);
  }
  return *t;
}

WeightView matrix(const GgufFile& g, const std::string& name, uint64_t cols, uint64_t rows) {
  const GgufTensor& t = require_tensor(g, name, {cols, rows});
  const QuantTraits& traits = quant_traits(t.type);
  TS_CHECK(cols % traits.block_elems == 0, g.name(), ": tensor ", name, " row length ", cols,
           " is not a multiple of the ", traits.name, " block size");
  return WeightView{&traits, t.data, rows, cols};
}

// Rows first.. of a matrix, as a matrix of its own (Q, K and V of a fused attn_qkv).
WeightView row_range(const WeightView& w, size_t first, size_t rows) {
  WeightView part = w;
  part.data = w.data + first * w.row_stride();
  part.rows = rows;
  return part;
}

std::vector<float> vector_f32(const GgufFile& g, const std::string& name, uint64_t n) {
  const GgufTensor& t = require_tensor(g, name, {n});
  std::vector<float> out(n);
  quant_traits(t.type).to_float(t.data, out.data(), n);
  return out;
}

}  // namespace

std::unique_ptr<Model> Model::load(const std::string& path) {
  auto m = std::make_unique<Model>();
  m->gguf_ = GgufFile::open(path);
  const GgufFile& g = *m->gguf_;
  m->config_ = ModelConfig::from_gguf(g);
  const ModelConfig& c = m->config_;
  m->tokenizer_ = Tokenizer::from_gguf(g);
  TS_CHECK(static_cast<uint32_t>(m->tokenizer_->n_vocab()) == c.n_vocab, g.name(), ": tokenizer has ",
           m->tokenizer_->n_vocab(), " tokens but the model vocabulary is ", c.n_vocab);

  const Architecture& arch = c.traits;
  const uint64_t d = c.n_embd, qd = c.q_dim, kv = c.kv_dim(), hd = c.head_dim;
  m->token_embd_ = matrix(g, "token_embd.weight", d, c.n_vocab);
  m->output_ = g.find_tensor("output.weight") ? matrix(g, "output.weight", d, c.n_vocab) : m->token_embd_;
  m->output_norm_ = vector_f32(g, "output_norm.weight", d);
  for (uint32_t i = 0; i < c.n_layers; ++i) {
    const std::string p = cat("blk.", i, ".");
    LayerWeights L;
    L.attn_norm = vector_f32(g, p + "attn_norm.weight", d);
    L.ffn_norm = vector_f32(g, p + "ffn_norm.weight", d);
    if (arch.fused_qkv) {
      const WeightView qkv = matrix(g, p + "attn_qkv.weight", d, qd + 2 * kv);
      L.wq = row_range(qkv, 0, qd);
      L.wk = row_range(qkv, qd, kv);
      L.wv = row_range(qkv, qd + kv, kv);
    } else {
      L.wq = matrix(g, p + "attn_q.weight", d, qd);
      L.wk = matrix(g, p + "attn_k.weight", d, kv);
      L.wv = matrix(g, p + "attn_v.weight", d, kv);
    }
    L.wo = matrix(g, p + "attn_output.weight", qd, d);
    if (arch.qkv_bias) {
      L.bq = vector_f32(g, p + "attn_q.bias", qd);
      L.bk = vector_f32(g, p + "attn_k.bias", kv);
      L.bv = vector_f32(g, p + "attn_v.bias", kv);
    }
    if (arch.qk_norm) {
      L.q_norm = vector_f32(g, p + "attn_q_norm.weight", hd);
      L.k_norm = vector_f32(g, p + "attn_k_norm.weight", hd);
    }
    if (arch.post_norms) {
      L.post_attn_norm = vector_f32(g, p + "post_attention_norm.weight", d);
      L.post_ffn_norm = vector_f32(g, p + "post_ffw_norm.weight", d);
    }
    if (arch.fused_gate_up) {
      const WeightView gate_up = matrix(g, p + "ffn_up.weight", d, 2 * uint64_t{c.n_ff});
      L.w_gate = row_range(gate_up, 0, c.n_ff);
      L.w_up = row_range(gate_up, c.n_ff, c.n_ff);
    } else {
      L.w_gate = matrix(g, p + "ffn_gate.weight", d, c.n_ff);
      L.w_up = matrix(g, p + "ffn_up.weight", d, c.n_ff);
    }
    L.w_down = matrix(g, p + "ffn_down.weight", c.n_ff, d);
    m->layers_.push_back(std::move(L));
  }
  m->pack_matrices();

  const size_t half = c.rot_dim / 2;
  for (const RopeSpec& rope : c.ropes) {
    std::vector<float>& inv_freq = m->rope_inv_freq_.emplace_back(half);
    for (size_t i = 0; i < half; ++i)
      inv_freq[i] =
          static_cast<float>(std::pow(double{rope.base}, -2.0 * double(i) / c.rot_dim) / rope.linear_scale);
  }
  TS_CHECK(!g.find_tensor("rope_factors_long.weight") && !g.find_tensor("rope_factors_short.weight"),
           g.name(), ": LongRoPE scaling (rope_factors_long/short) is not supported");
  // Llama 3.1 style scaling ships per-frequency divisors (of the global RoPE).
  if (g.find_tensor("rope_freqs.weight")) {
    const std::vector<float> factors = vector_f32(g, "rope_freqs.weight", half);
    for (size_t i = 0; i < half; ++i) m->rope_inv_freq_[0][i] /= factors[i];
  }
  return m;
}

// The matrices of matrix products get a packed copy; the embedding table is read row by row (when
// tied, the rows it reads fault back in from the file after their pages were released).
void Model::pack_matrices() {
  std::vector<WeightView*> matrices{&output_};
  for (LayerWeights& L : layers_)
    for (WeightView* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) matrices.push_back(w);
  std::erase_if(matrices, [](const WeightView* w) { return !packable(w->traits->type); });
  const auto aligned_bytes = [](const WeightView& w) {
    return (packed_bytes(w.traits->type, w.rows, w.cols) + 63) / 64 * 64;
  };
  size_t total = 0;
  for (const WeightView* w : matrices) total += aligned_bytes(*w);
  packed_ = LargePageBuffer(total);
  uint8_t* p = packed_.data();
  for (WeightView* w : matrices) {
    pack_rows(w->traits->type, w->data, w->rows, w->cols, p);
    release_pages(w->data, w->rows * w->row_stride());
    w->packed = p;
    p += aligned_bytes(*w);
  }
}

size_t Model::decode_weight_bytes() const {
  const auto matrix_bytes = [](const WeightView& w) {
    return w.packed ? packed_bytes(w.traits->type, w.rows, w.cols) : w.rows * w.row_stride();
  };
  size_t total = matrix_bytes(output_) + output_norm_.size() * sizeof(float);
  for (const LayerWeights& L : layers_) {
    for (const WeightView* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
      total += matrix_bytes(*w);
    for (const auto* v : {&L.attn_norm, &L.ffn_norm, &L.bq, &L.bk, &L.bv, &L.q_norm, &L.k_norm,
                          &L.post_attn_norm, &L.post_ffn_norm})
      total += v->size() * sizeof(float);
  }
  return total;
}

size_t Model::weight_bytes() const {
  size_t total = 0;
  for (const GgufTensor& t : gguf_->tensors()) total += t.n_bytes;
  return total;
}

}  // namespace ts
