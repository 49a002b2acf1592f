#include <gtest/gtest.h>

#include <map>
#include <tuple>
#include <vector>

#include "runtime/sampler.h"

namespace ts {
namespace {

TEST(Sampler, GreedyPicksArgmaxAndBreaksTiesByLowestId) {
  Sampler s({.temperature = 0.0f});
  std::vector<float> logits{0.1f, 3.0f, -1.0f, 3.0f};
  EXPECT_EQ(s.sample(logits, {}), 1);
}

TEST(Sampler, RepetitionPenaltyChangesTheGreedyChoice) {
  Sampler s({.temperature = 0.0f, .repeat_penalty = 2.0f});
  std::vector<float> logits{2.0f, 1.5f};
  std::vector<int32_t> history{0};
  EXPECT_EQ(s.sample(logits, history), 1);  // 2.0 / 2 = 1.0 < 1.5
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedDiffers) {
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i % 7) * 0.3f;
  auto draw = [&](uint64_t seed) {
    Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = seed});
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(s.sample(logits, {}));
    return out;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
}

TEST(Sampler, TopKOneIsGreedy) {
  Sampler s({.temperature = 1.5f, .top_k = 1, .seed = 9});
  std::vector<float> logits{0.0f, 0.2f, 5.0f, 0.1f};
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.sample(logits, {}), 2);
}

TEST(Sampler, TopPAndMinPCutTheTail) {
  // p ~ {0.64, 0.24, 0.09, 0.03}: top-p 0.8 keeps two tokens; min-p 0.3 keeps two as well.
  std::vector<float> logits{3.0f, 2.0f, 1.0f, 0.0f};
  for (SamplerParams p : {SamplerParams{.temperature = 1.0f, .top_k = 0, .top_p = 0.8f, .min_p = 0.0f},
                          SamplerParams{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.3f}}) {
    Sampler s(p);
    std::map<int32_t, int> seen;
    for (int i = 0; i < 2000; ++i) seen[s.sample(logits, {})]++;
    EXPECT_EQ(seen.size(), 2u);
    EXPECT_GT(seen[0], seen[1]);
  }
}

// A vocabulary-sized list whose nucleus holds many tokens: the cuts keep exactly the right ones. 1500 tokens
// of equal logit, spread among 50000 unlikely ones (a fixed seed: deterministic).
TEST(Sampler, CutsOnALargeVocabularyKeepTheWholeNucleus) {
  std::vector<float> logits(50000, -40.0f);
  std::vector<int32_t> likely;
  for (int32_t i = 0; i < 1500; ++i) likely.push_back(i * 31 + 7);
  for (int32_t id : likely) logits[static_cast<size_t>(id)] = 0.0f;
  for (auto [top_p, min_p, kept] : {std::tuple{0.499f, 0.0f, 749}, std::tuple{1.0f, 0.5f, 1500}}) {
    Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = top_p, .min_p = min_p, .seed = 5});
    std::map<int32_t, int> seen;
    for (int i = 0; i < 4000; ++i) seen[s.sample(logits, {})]++;
    // Ties sort by id, so the nucleus is the `kept` lowest ids among the likely ones.
    EXPECT_EQ(seen.begin()->first, likely.front());
    EXPECT_EQ(seen.rbegin()->first, likely[static_cast<size_t>(kept) - 1]) << "top_p " << top_p;
    EXPECT_GT(seen.size(), static_cast<size_t>(kept) * 3 / 4);
  }
}

TEST(Sampler, TemperatureOneMatchesSoftmaxFrequencies) {
  Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 3});
  std::vector<float> logits{0.0f, std::log(3.0f)};  // p = 1/4, 3/4
  int ones = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ones += s.sample(logits, {}) == 1;
  EXPECT_NEAR(ones / double(n), 0.75, 0.02);
}

}  // namespace
}  // namespace ts
