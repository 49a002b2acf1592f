#include "model/model_config.h"

#include <cmath>

#include "core/error.h"
#include "model/gguf.h"

namespace ts {
namespace {

uint32_t require_dim(const GgufFile& g, const std::string& key, uint64_t max) {
  const uint64_t v = g.require(key).as_u64(key);
  TS_CHECK(v > 0 && v <= max, g.name(), ": metadata ", key, " = ", v, " is out of range (1..", max, ")");
  return static_cast<uint32_t>(v);
}

uint32_t optional_dim(const GgufFile& g, const std::string& key, uint32_t fallback, uint64_t max) {
  return g.find(key) ? require_dim(g, key, max) : fallback;
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const GgufFile& g) {
  ModelConfig c;
  c.arch = g.require("general.architecture").as_string("general.architecture");
  const Architecture* traits = find_architecture(c.arch);
  TS_CHECK(traits, g.name(), ": unsupported architecture '", c.arch,
           "' (supported: ", supported_architectures(), ")");
  c.traits = *traits;
  const std::string a = c.arch + ".";
  c.name = g.get_string("general.name", c.arch);
  c.n_layers = require_dim(g, a + "block_count", 1024);
  c.n_embd = require_dim(g, a + "embedding_length", 1 << 16);
  c.n_ff = require_dim(g, a + "feed_forward_length", 1 << 18);
  c.n_heads = require_dim(g, a + "attention.head_count", 1024);
  c.n_kv_heads = optional_dim(g, a + "attention.head_count_kv", c.n_heads, 1024);
  TS_CHECK(c.n_heads % c.n_kv_heads == 0, g.name(), ": head_count ", c.n_heads,
           " is not a multiple of head_count_kv ", c.n_kv_heads);
  if (g.find(a + "attention.key_length")) {
    c.head_dim = require_dim(g, a + "attention.key_length", 1024);
  } else {
    TS_CHECK(c.n_embd % c.n_heads == 0, g.name(), ": embedding_length ", c.n_embd,
             " is not a multiple of head_count ", c.n_heads, " (and no attention.key_length)");
    c.head_dim = c.n_embd / c.n_heads;
  }
  TS_CHECK(optional_dim(g, a + "attention.value_length", c.head_dim, 1024) == c.head_dim, g.name(),
           ": attention.value_length differs from the key length ", c.head_dim, " (unsupported)");
  c.q_dim = c.n_heads * c.head_dim;
  c.rot_dim = static_cast<uint32_t>(g.get_u64(a + "rope.dimension_count", c.head_dim));
  TS_CHECK(c.rot_dim % 2 == 0 && c.rot_dim <= c.head_dim, g.name(), ": rope.dimension_count ", c.rot_dim,
           " is invalid for head dim ", c.head_dim);
  c.n_ctx_train = static_cast<uint32_t>(g.get_u64(a + "context_length", 2048));
  c.rms_eps = static_cast<float>(g.get_f64(a + "attention.layer_norm_rms_epsilon", 1e-5));
  RopeSpec global;
  global.base = static_cast<float>(g.get_f64(a + "rope.freq_base", 10000.0));
  TS_CHECK(std::isfinite(global.base) && global.base > 1, g.name(), ": rope.freq_base ", global.base,
           " must be above 1");
  const std::string scaling = g.get_string(a + "rope.scaling.type", "none");
  if (scaling == "linear") {
    global.linear_scale = static_cast<float>(g.get_f64(a + "rope.scaling.factor", 1.0));
    TS_CHECK(global.linear_scale > 0, g.name(), ": rope.scaling.factor must be positive");
  } else {
    // Llama 3.1 "llama3" scaling is carried by the rope_freqs.weight tensor, read with the weights.
    TS_CHECK(scaling == "none" || scaling == "llama3", g.name(), ": unsupported rope scaling '", scaling,
             "'");
  }
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  // Gemma 3 scales by query_pre_attn_scalar, which GGUF does not carry: head_dim but for 27B (its
  // 62 layers), where it is n_embd / n_heads (llama.cpp's rule).
  if (c.arch == "gemma3" && c.n_layers == 62)
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd) / static_cast<float>(c.n_heads));
  // Phi-3's LongRoPE (Phi-3.5, the 128K Phi-3s, Phi-4-mini) scales its tables by attn_factor and
  // per-frequency factors chosen by context length: not implemented, so refused rather than wrong.
  TS_CHECK(!g.find(a + "rope.scaling.attn_factor"), g.name(),
           ": LongRoPE scaling (rope.scaling.attn_factor, rope_factors_long/short) is not supported");
  if (c.traits.scaled_embedding) c.embedding_scale = std::sqrt(static_cast<float>(c.n_embd));

  // Sliding windows: the layers the architecture makes local, with their own RoPE (unscaled) if
  // it has one.
  c.ropes = {global};
  // 0: none (Phi-3 files without a window write 0).
  const uint64_t window_key = g.get_u64(a + "attention.sliding_window", 0);
  TS_CHECK(window_key <= (uint64_t{1} << 31), g.name(), ": attention.sliding_window ", window_key,
           " is out of range");
  const auto window = static_cast<uint32_t>(window_key);
  LayerPlan local{window, 0};
  if (window > 0 && c.traits.local_rope_base > 0) {
    c.ropes.push_back({c.traits.local_rope_base, 1.0f});
    local.rope = 1;
  }
  const uint32_t every = c.traits.global_every;
  for (uint32_t i = 0; i < c.n_layers; ++i)
    c.layers.push_back(window > 0 && (every == 0 || (i + 1) % every != 0) ? local : LayerPlan{});

  const GgufValue* tokens = g.find("tokenizer.ggml.tokens");
  c.n_vocab =
      static_cast<uint32_t>(g.get_u64(a + "vocab_size", tokens ? tokens->as_array("tokens").size() : 0));
  TS_CHECK(c.n_vocab > 0, g.name(), ": cannot determine vocabulary size");
  return c;
}

}  // namespace ts
