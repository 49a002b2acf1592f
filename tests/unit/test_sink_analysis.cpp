// OrthoRank's sink statistics (analyze sink) on stories260K.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>

#include "core/thread_pool.h"
#include "eval/sink_analysis.h"
#include "kernels/matmul.h"
#include "kernels/simd_ops.h"
#include "stories_fixture.h"

namespace ts {
namespace {

TEST(SinkAnalysis, RecordsEveryLayersNormalizedStateAndLeavesTheModelDense) {
  const Model& m = stories();
  const ModelConfig& c = m.config();
  const auto tokens = random_tokens(600, 3);  // longer than one internal batch of 512
  ThreadPool pool(1);
  Transformer tf(m, pool, tokens.size());
  size_t layers_seen = 0;
  const SinkStates s = record_normed_states(tf, tokens, [&](size_t l) { EXPECT_EQ(l, layers_seen++); });
  EXPECT_EQ(layers_seen, c.n_layers);
  ASSERT_EQ(s.n_tok, tokens.size());
  // Layer 0's input is the embedding: h̄ = RMSNorm_attn(embedding), gain included.
  std::vector<float> emb(c.n_embd), want(c.n_embd);
  for (size_t t : {size_t{0}, size_t{599}}) {
    weight_row_to_float(m.token_embd(), static_cast<size_t>(tokens[t]), emb.data());
    ops().rms_norm(emb.data(), m.layers()[0].attn_norm.data(), want.data(), c.n_embd, c.rms_eps);
    const std::span<const float> got = s.at(0, t);
    for (size_t i = 0; i < c.n_embd; ++i) ASSERT_EQ(got[i], want[i]) << "token " << t << " dim " << i;
  }
  EXPECT_NE(cosine(s.at(1, 5), s.at(2, 5)), 1.0) << "layers differ";

  EXPECT_EQ(tf.n_past(), 0u);
  EXPECT_EQ(tf.policies(), nullptr);
  Transformer fresh(m, pool, tokens.size());
  const std::span<const float> after = tf.forward(tokens, false);
  const std::span<const float> dense = fresh.forward(tokens, false);
  EXPECT_TRUE(std::equal(after.begin(), after.end(), dense.begin()));
}

TEST(SinkAnalysis, CsvHoldsTheThreeStatistics) {
  SinkStates s{2, 3, 2, {}};
  // layer 0: tokens (1,0) (0,1) (1,1); layer 1: (2,0) (1,0) (0,3)
  s.normed = {1, 0, 0, 1, 1, 1, 2, 0, 1, 0, 0, 3};
  const std::vector<std::string> texts{"<s>", "a,\"b\"", "\n"};
  std::ostringstream out;
  const std::vector<size_t> positions{0, 7};
  write_sink_csv(out, s, texts, positions);
  std::vector<std::string> lines;
  std::istringstream in(out.str());
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  // header + per layer (2 sink_cos + 3 norm) + 2x2 layer_cos of position 0 (7 is past the text);
  // each of the 4 rows of the "\n" token spans two physical lines.
  ASSERT_EQ(lines.size(), 1u + 2 * 5 + 4 + 4);
  EXPECT_EQ(lines[0], "stat,position,token,newline,layer,layer2,value");
  EXPECT_EQ(lines[1], "norm,0,\"<s>\",0,0,,1");
  EXPECT_EQ(lines[2], "sink_cos,1,\"a,\"\"b\"\"\",0,0,,0");
  EXPECT_EQ(lines[4], "sink_cos,2,\"");
  EXPECT_EQ(lines[5], "\",1,0,,0.7071068");
  EXPECT_EQ(lines[lines.size() - 3], "layer_cos,0,\"<s>\",0,0,1,1");
  EXPECT_EQ(lines.back(), "layer_cos,0,\"<s>\",0,1,1,1");
}

}  // namespace
}  // namespace ts
