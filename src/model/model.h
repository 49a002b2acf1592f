#pragma once
// A loaded model: GGUF mapping, config, tokenizer and typed views of every weight tensor.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "model/gguf.h"
#include "model/model_config.h"
#include "model/tokenizer.h"

namespace ts {

// One layer's tensors; what an architecture lacks stays empty (Architecture says which it has).
struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;
  WeightView wq, wk, wv, wo;          // Q, K, V: row ranges of one matrix when the file fuses them
  std::vector<float> bq, bk, bv;      // QKV bias
  std::vector<float> q_norm, k_norm;  // per-head RMSNorm weights (head_dim)
  std::vector<float> post_attn_norm, post_ffn_norm;  // RMSNorm of the block outputs (n_embd)
  WeightView w_gate, w_up, w_down;
};

class Model {
 public:
  // Loads and validates everything; throws ts::Error with a one-line reason.
  static std::unique_ptr<Model> load(const std::string& path);

  const ModelConfig& config() const { return config_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const GgufFile& gguf() const { return *gguf_; }

  const WeightView& token_embd() const { return token_embd_; }
  const WeightView& output() const { return output_; }  // token_embd when tied
  const std::vector<float>& output_norm() const { return output_norm_; }
  const std::vector<LayerWeights>& layers() const { return layers_; }
  // RoPE inverse frequencies per rotated pair of config().ropes[rope], with any frequency scaling applied.
  const std::vector<float>& rope_inv_freq(size_t rope = 0) const { return rope_inv_freq_[rope]; }
  // Bytes of all weight tensors in the file.
  size_t weight_bytes() const;
  // Bytes one decode step reads: every matrix of the matrix products as it is read (its packed
  // copy where there is one) and the norm and bias vectors; not the embedding table, of which a
  // step reads one row (unless it is also the output matrix).
  size_t decode_weight_bytes() const;

 private:
  std::unique_ptr<GgufFile> gguf_;
  ModelConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  WeightView token_embd_, output_;
  std::vector<float> output_norm_;
  std::vector<LayerWeights> layers_;
  std::vector<std::vector<float>> rope_inv_freq_;
  // Packed copies of the matrices the fast products read (kernels/packed_rows.h), 64-byte aligned
  // in one buffer; the mapped pages they were copied from are released.
  LargePageBuffer packed_;
  void pack_matrices();
};

}  // namespace ts
