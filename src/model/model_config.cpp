#include "model/model_config.h"

#include "core/error.h"
#include "model/gguf.h"

namespace ts {
namespace {

uint32_t require_dim(const GgufFile& g, const std::string& key, uint64_t max) {
  const uint64_t v = g.require(key).as_u64(key);
  TS_CHECK(v > 0 && v <= max, g.name(), ": metadata ", key, " = ", v, " is out of range (1..", max, ")");
  return static_cast<uint32_t>(v);
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const GgufFile& g) {
  ModelConfig c;
  c.arch = g.require("general.architecture").as_string("general.architecture");
  TS_CHECK(c.arch == "llama" || c.arch == "qwen2", g.name(), ": unsupported architecture '", c.arch,
           "' (supported: llama, qwen2)");
  const std::string a = c.arch + ".";
  c.name = g.get_string("general.name", c.arch);
  c.n_layers = require_dim(g, a + "block_count", 1024);
  c.n_embd = require_dim(g, a + "embedding_length", 1 << 16);
  c.n_ff = require_dim(g, a + "feed_forward_length", 1 << 18);
  c.n_heads = require_dim(g, a + "attention.head_count", 1024);
  c.n_kv_heads =
      g.find(a + "attention.head_count_kv") ? require_dim(g, a + "attention.head_count_kv", 1024) : c.n_heads;
  TS_CHECK(c.n_embd % c.n_heads == 0, g.name(), ": embedding_length ", c.n_embd,
           " is not a multiple of head_count ", c.n_heads);
  TS_CHECK(c.n_heads % c.n_kv_heads == 0, g.name(), ": head_count ", c.n_heads,
           " is not a multiple of head_count_kv ", c.n_kv_heads);
  c.head_dim = c.n_embd / c.n_heads;
  c.rot_dim = static_cast<uint32_t>(g.get_u64(a + "rope.dimension_count", c.head_dim));
  TS_CHECK(c.rot_dim % 2 == 0 && c.rot_dim <= c.head_dim, g.name(), ": rope.dimension_count ", c.rot_dim,
           " is invalid for head dim ", c.head_dim);
  c.n_ctx_train = static_cast<uint32_t>(g.get_u64(a + "context_length", 2048));
  c.rms_eps = static_cast<float>(g.get_f64(a + "attention.layer_norm_rms_epsilon", 1e-5));
  c.rope_base = static_cast<float>(g.get_f64(a + "rope.freq_base", 10000.0));
  const std::string scaling = g.get_string(a + "rope.scaling.type", "none");
  if (scaling == "linear") {
    c.rope_linear_scale = static_cast<float>(g.get_f64(a + "rope.scaling.factor", 1.0));
    TS_CHECK(c.rope_linear_scale > 0, g.name(), ": rope.scaling.factor must be positive");
  } else {
    // Llama 3.1 "llama3" scaling is carried by the rope_freqs.weight tensor, read with the weights.
    TS_CHECK(scaling == "none" || scaling == "llama3", g.name(), ": unsupported rope scaling '", scaling,
             "'");
  }
  c.rope_layout = c.arch == "qwen2" ? RopeLayout::Neox : RopeLayout::Interleaved;
  c.qkv_bias = c.arch == "qwen2";
  const GgufValue* tokens = g.find("tokenizer.ggml.tokens");
  c.n_vocab =
      static_cast<uint32_t>(g.get_u64(a + "vocab_size", tokens ? tokens->as_array("tokens").size() : 0));
  TS_CHECK(c.n_vocab > 0, g.name(), ": cannot determine vocabulary size");
  return c;
}

}  // namespace ts
