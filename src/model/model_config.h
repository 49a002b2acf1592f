#pragma once
// Architecture hyper-parameters read from GGUF metadata ("<arch>.*" keys).
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/elementwise.h"

namespace ts {

class GgufFile;

struct ModelConfig {
  std::string arch;  // "llama" | "qwen2"
  std::string name;
  uint32_t n_layers = 0;
  uint32_t n_embd = 0;
  uint32_t n_ff = 0;
  uint32_t n_heads = 0;
  uint32_t n_kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t rot_dim = 0;  // dims of each head that RoPE rotates
  uint32_t n_vocab = 0;
  uint32_t n_ctx_train = 0;
  float rms_eps = 1e-5f;
  float rope_base = 10000.0f;
  float rope_linear_scale = 1.0f;  // positions are divided by this ("linear" rope scaling)
  RopeLayout rope_layout = RopeLayout::Interleaved;
  bool qkv_bias = false;

  // Validates shapes against each other; throws ts::Error naming the bad key.
  static ModelConfig from_gguf(const GgufFile& gguf);
};

}  // namespace ts
