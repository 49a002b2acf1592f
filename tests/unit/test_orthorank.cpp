// OrthoRank's token selection on hand-made hidden states: known answers for the prompt (Algorithm
// 1), the decode rule, ties, the sink, and the ablation options.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "model/model.h"
#include "policies/builtin_policies.h"
#include "policies/orthorank/context_rank.h"
#include "test_paths.h"

namespace ts {
namespace {

const Model& stories() {
  static const auto model = Model::load(shared_path("models/stories260K.gguf"));
  return *model;
}

// Rows of dimension 2 whose dot product with the sink row (1, 0) is x (and whose second
// coordinate is y: the residual variant scores that instead).
struct States {
  std::vector<float> normed, residual;
  void add(float x, float y = 0) {
    normed.insert(normed.end(), {x, 0});
    residual.insert(residual.end(), {y, 0});
  }
  LayerInput at(size_t layer, size_t pos0, size_t first_row, size_t n) const {
    return {layer, pos0, n, 2, residual.data() + first_row * 2, normed.data() + first_row * 2};
  }
};

std::unique_ptr<Policy> bound(const std::string& spec) {
  auto p = builtin_policies().create(spec);
  p->bind(stories());
  return p;
}

std::vector<uint32_t> select(Policy& p, const LayerInput& in, std::vector<float>* scores = nullptr) {
  TokenSelection sel;
  p.select_tokens(in, sel);
  if (scores) *scores = sel.scores;
  return sel.rows;
}

// Sink (1, 0), then |h0·hi| = 0.9 0.1 0.5 0.1 0.7 0.3 (the -0.5 checks the absolute value).
States prompt() {
  States s;
  for (float x : {1.0f, 0.9f, 0.1f, -0.5f, 0.1f, 0.7f, 0.3f}) s.add(x);
  return s;
}

TEST(OrthoRank, PromptKeepsTheIntRatioNSmallestScoresInPositionOrder) {
  const States s = prompt();
  std::vector<float> scores;
  // k = int(0.5 * 7) = 3: the two 0.1s and 0.3.
  EXPECT_EQ(select(*bound("orthorank:layers=1,ratio=0.5"), s.at(1, 0, 0, 7), &scores),
            (std::vector<uint32_t>{2, 4, 6}));
  EXPECT_TRUE(std::isinf(scores[0]));
  EXPECT_FLOAT_EQ(scores[3], 0.5f);
  // k = int(0.3 * 7) = 2; k = 1: a tie goes to the earlier position.
  EXPECT_EQ(select(*bound("orthorank:layers=1,ratio=0.3"), s.at(1, 0, 0, 7)), (std::vector<uint32_t>{2, 4}));
  EXPECT_EQ(select(*bound("orthorank:layers=1,ratio=0.15"), s.at(1, 0, 0, 7)), (std::vector<uint32_t>{2}));
  EXPECT_TRUE(select(*bound("orthorank:layers=1,ratio=0.1"), s.at(1, 0, 0, 7)).empty());
  // The sink is chosen only when every token is.
  EXPECT_EQ(select(*bound("orthorank:layers=1,ratio=0.99"), s.at(1, 0, 0, 7)).size(), 6u);
  EXPECT_EQ(select(*bound("orthorank:layers=1,ratio=1"), s.at(1, 0, 0, 7)).size(), 7u);
}

TEST(OrthoRank, DecodeRanksEachNewTokenAgainstTheAccumulatedContext) {
  States s = prompt();
  s.add(0.2f);  // position 7
  s.add(0.6f);  // position 8
  s.add(0.0f);  // position 9
  auto p = bound("orthorank:layers=1,ratio=0.5");
  select(*p, s.at(1, 0, 0, 7));
  // N = 8, k = 4: 0.1 0.1 0.2 0.3 -> runs.
  EXPECT_EQ(select(*p, s.at(1, 7, 7, 1)), (std::vector<uint32_t>{0}));
  // N = 9, k = 4: 0.1 0.1 0.2 0.3 are smaller than 0.6 -> passes through.
  EXPECT_TRUE(select(*p, s.at(1, 8, 8, 1)).empty());
  // Prompt scores stay as computed: after forgetting positions >= 8, 0.0 at position 8 runs.
  p->truncate(8);
  EXPECT_EQ(select(*p, s.at(1, 8, 9, 1)), (std::vector<uint32_t>{0}));
  // Several new tokens at once follow the same rule (N = 10, k = 5).
  p->truncate(7);
  EXPECT_EQ(select(*p, s.at(1, 7, 7, 3)), (std::vector<uint32_t>{0, 2}));
  // A new sequence must start at position 0.
  p->truncate(0);
  EXPECT_THROW(select(*p, s.at(1, 7, 7, 1)), Error);
}

TEST(OrthoRank, EachLayerRanksItsOwnScores) {
  States s = prompt();
  auto p = bound("orthorank:layers=1,3,ratio=0.3");
  EXPECT_EQ(select(*p, s.at(1, 0, 0, 7)), (std::vector<uint32_t>{2, 4}));
  States other;
  for (float x : {1.0f, 0.05f, 0.9f, 0.9f, 0.9f, 0.9f, 0.02f}) other.add(x);
  EXPECT_EQ(select(*p, other.at(3, 0, 0, 7)), (std::vector<uint32_t>{1, 6}));
  EXPECT_EQ(p->claims().size(), 1u);
  EXPECT_EQ(p->claims()[0].layers, (std::vector<uint32_t>{1, 3}));
}

TEST(OrthoRank, AblationsReverseRandomResidualAndNoKv) {
  const States s = prompt();
  // Reverse: the largest |h0·hi| (0.9 and 0.7), never the sink.
  EXPECT_EQ(select(*bound("orthorank:layers=1,ratio=0.3,select=reverse"), s.at(1, 0, 0, 7)),
            (std::vector<uint32_t>{1, 5}));
  // Random: scores fixed by (seed, layer, position).
  auto whole = bound("orthorank:layers=1,ratio=0.5,select=random,seed=3");
  auto split = bound("orthorank:layers=1,ratio=0.5,select=random,seed=3");
  const auto a = select(*whole, s.at(1, 0, 0, 7));
  EXPECT_EQ(a.size(), 3u);
  EXPECT_EQ(std::count(a.begin(), a.end(), 0u), 0);
  std::vector<float> sa, sb;
  select(*whole, s.at(1, 7, 0, 1), &sa);
  select(*split, s.at(1, 0, 0, 7));
  select(*split, s.at(1, 7, 0, 1), &sb);
  EXPECT_EQ(sa, sb);
  // Residual stage: scores come from h, here 2·y.
  States r;
  for (float y : {2.0f, 5.0f, 1.0f, 4.0f}) r.add(0.5f, y);
  EXPECT_EQ(select(*bound("orthorank:layers=1,ratio=0.5,stage=residual"), r.at(1, 0, 0, 4)),
            (std::vector<uint32_t>{2, 3}));
  // kv=selected: the unselected rows compute no K/V.
  TokenSelection sel;
  bound("orthorank:layers=1,ratio=0.5,kv=selected")->select_tokens(s.at(1, 0, 0, 7), sel);
  EXPECT_FALSE(sel.kv_for_unselected);
}

TEST(ContextRank, TiesGoToTheEarlierPosition) {
  ContextRank r;
  r.add(0, std::vector<float>{1.0f, 0.5f, 0.5f});
  EXPECT_TRUE(r.ranks_within(0.5f, 1, 1));
  EXPECT_FALSE(r.ranks_within(0.5f, 2, 1));
  EXPECT_TRUE(r.ranks_within(0.5f, 2, 2));
  EXPECT_THROW(r.add(5, std::vector<float>{0.0f}), Error);
}

}  // namespace
}  // namespace ts
