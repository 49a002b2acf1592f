// ModelConfig from GGUF metadata per architecture: the per-layer plan (Gemma 3's local and global
// layers, Mistral's window on every layer), the attention scale, and what is refused in one line
// rather than run wrong (Phi-3's LongRoPE).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "gguf_writer.h"
#include "model/gguf.h"
#include "model/model_config.h"

namespace ts {
namespace {

using test::GgufWriter;
using test::WValue;

ModelConfig config_of(const std::string& arch, uint32_t n_layers, uint32_t window,
                      const std::string& extra_key = "") {
  GgufWriter w;
  const std::string a = arch + ".";
  w.add("general.architecture", WValue::str(arch))
      .add(a + "block_count", WValue::u32(n_layers))
      .add(a + "embedding_length", WValue::u32(64))
      .add(a + "feed_forward_length", WValue::u32(128))
      .add(a + "attention.head_count", WValue::u32(4))
      .add(a + "attention.head_count_kv", WValue::u32(2))
      .add(a + "attention.key_length", WValue::u32(32))
      .add(a + "vocab_size", WValue::u32(256));
  if (window) w.add(a + "attention.sliding_window", WValue::u32(window));
  if (!extra_key.empty()) w.add(a + extra_key, WValue::f32(1.19f));
  const std::string path = testing::TempDir() + "/config_" + arch + ".gguf";
  w.write(path);
  return ModelConfig::from_gguf(*GgufFile::open(path));
}

TEST(ModelConfig, Gemma3LayersAreLocalButEverySixthWithTheirOwnRope) {
  const ModelConfig c = config_of("gemma3", 13, 512);
  EXPECT_EQ(c.q_dim, 128u);  // 4 heads x 32, not n_embd
  ASSERT_EQ(c.ropes.size(), 2u);
  EXPECT_EQ(c.ropes[1].base, 10000.0f);
  for (uint32_t i = 0; i < 13; ++i) {
    const bool global = (i + 1) % 6 == 0;
    EXPECT_EQ(c.layers[i].window, global ? 0u : 512u) << i;
    EXPECT_EQ(c.layers[i].rope, global ? 0u : 1u) << i;
  }
  EXPECT_FLOAT_EQ(c.embedding_scale, 8.0f);
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / std::sqrt(32.0f));
  // Gemma 3 27B (62 layers) scales by n_embd / n_heads, as llama.cpp does.
  EXPECT_FLOAT_EQ(config_of("gemma3", 62, 1024).attn_scale, 1.0f / std::sqrt(16.0f));
}

TEST(ModelConfig, MistralWindowCoversEveryLayerAndZeroMeansNone) {
  const ModelConfig c = config_of("llama", 3, 4096);
  for (const LayerPlan& p : c.layers) EXPECT_EQ(p.window, 4096u);
  EXPECT_EQ(c.ropes.size(), 1u);
  for (const LayerPlan& p : config_of("phi3", 2, 0).layers) EXPECT_EQ(p.window, 0u);
}

TEST(ModelConfig, LongRopeIsRefusedInOneLine) {
  try {
    config_of("phi3", 2, 0, "rope.scaling.attn_factor");
    ADD_FAILURE() << "a LongRoPE file loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LongRoPE"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ts
