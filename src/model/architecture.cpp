#include "model/architecture.h"

#include <array>

namespace ts {
namespace {

constexpr std::array<Architecture, 5> kArchitectures = [] {
  Architecture llama;  // Llama 1-3, Mistral (as converted by llama.cpp), SmolLM
  Architecture qwen2 = llama;
  qwen2.name = "qwen2";
  qwen2.rope_layout = RopeLayout::Neox;
  qwen2.qkv_bias = true;
  Architecture qwen3 = llama;
  qwen3.name = "qwen3";
  qwen3.rope_layout = RopeLayout::Neox;
  qwen3.qk_norm = true;
  Architecture gemma3 = llama;
  gemma3.name = "gemma3";
  gemma3.rope_layout = RopeLayout::Neox;
  gemma3.ffn = FfnActivation::GeluTanh;
  gemma3.qk_norm = gemma3.post_norms = gemma3.scaled_embedding = true;
  gemma3.global_every = 6;
  gemma3.local_rope_base = 10000.0f;
  Architecture phi3 = llama;
  phi3.name = "phi3";
  phi3.rope_layout = RopeLayout::Neox;
  phi3.fused_qkv = phi3.fused_gate_up = true;
  return std::array{llama, qwen2, qwen3, gemma3, phi3};
}();

}  // namespace

const Architecture* find_architecture(std::string_view name) {
  for (const Architecture& a : kArchitectures)
    if (a.name == name) return &a;
  return nullptr;
}

std::string supported_architectures() {
  std::string out;
  for (const Architecture& a : kArchitectures)
    out += std::string(out.empty() ? "" : ", ") + std::string(a.name);
  return out;
}

}  // namespace ts
