#pragma once
// What sets an architecture apart from the llama decoder, as data: ModelConfig takes the row of
// general.architecture from one table, Model loads the tensors the row names, and the one forward
// pass follows its flags (gemma.cpp's layer configs, not a forward pass per architecture).
#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/elementwise.h"

namespace ts {

enum class FfnActivation {
  Silu,      // SwiGLU: silu(gate) * up
  GeluTanh,  // GeGLU: gelu(gate) * up, GELU's tanh approximation
};

struct Architecture {
  std::string_view name = "llama";
  RopeLayout rope_layout = RopeLayout::Interleaved;
  FfnActivation ffn = FfnActivation::Silu;
  bool qkv_bias = false;          // qwen2: biases on Q, K and V
  bool qk_norm = false;           // qwen3, gemma3: RMSNorm of each Q and K head before RoPE
  bool post_norms = false;        // gemma3: RMSNorm of the attention and FFN outputs before the residual add
  bool scaled_embedding = false;  // gemma3: token embeddings times sqrt(n_embd)
  bool fused_qkv = false;         // phi3: one attn_qkv matrix, Q rows then K rows then V rows
  bool fused_gate_up = false;     // phi3: ffn_up holds the gate rows, then the up rows
  // Sliding-window layers where the file has attention.sliding_window: every layer (0), or all
  // but every global_every-th (gemma3: layer i is global iff (i + 1) % 6 == 0, as llama.cpp has it).
  uint32_t global_every = 0;
  // RoPE base of the sliding-window layers (gemma3: 10000); 0: the file's rope.freq_base.
  float local_rope_base = 0.0f;
};

// The row of general.architecture, or nullptr.
const Architecture* find_architecture(std::string_view name);
// "llama, qwen2, ..." for error messages.
std::string supported_architectures();

}  // namespace ts
