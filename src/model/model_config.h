#pragma once
// Architecture hyper-parameters read from GGUF metadata ("<arch>.*" keys), and the per-layer
// plan the forward pass follows.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/elementwise.h"
#include "model/architecture.h"

namespace ts {

class GgufFile;

// One RoPE of the model: sliding-window layers of Gemma 3 rotate with another base than its
// global layers.
struct RopeSpec {
  float base = 10000.0f;
  float linear_scale = 1.0f;  // positions are divided by this ("linear" rope scaling)
};

// What one layer does differently from the others.
struct LayerPlan {
  uint32_t window = 0;  // a token attends to the last `window` positions, itself included; 0: all
  uint32_t rope = 0;    // index into ModelConfig::ropes
};

struct ModelConfig {
  std::string arch;  // general.architecture
  Architecture traits;
  std::string name;
  uint32_t n_layers = 0;
  uint32_t n_embd = 0;
  uint32_t n_ff = 0;
  uint32_t n_heads = 0;
  uint32_t n_kv_heads = 0;
  uint32_t head_dim = 0;  // attention.key_length, else n_embd / n_heads
  uint32_t q_dim = 0;     // n_heads * head_dim: the query width (not n_embd on Gemma 3 or Qwen3)
  uint32_t rot_dim = 0;   // dims of each head that RoPE rotates
  uint32_t n_vocab = 0;
  uint32_t n_ctx_train = 0;
  float rms_eps = 1e-5f;
  float attn_scale = 0.0f;       // scores are q . k * attn_scale (1 / sqrt(head_dim))
  float embedding_scale = 1.0f;  // token embeddings are multiplied by it (Gemma: sqrt(n_embd))
  // [0]: the file's rope.freq_base and linear scaling (global layers); [1]: sliding-window layers
  // when their RoPE differs.
  std::vector<RopeSpec> ropes;
  std::vector<LayerPlan> layers;  // n_layers entries

  // Validates shapes against each other; throws ts::Error naming the bad key.
  static ModelConfig from_gguf(const GgufFile& gguf);
  size_t kv_dim() const { return size_t{n_kv_heads} * head_dim; }
};

}  // namespace ts
