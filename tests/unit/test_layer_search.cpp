// Layer searches (SLEB iterative, Shortened one-shot), the layer budget of a sparsity, the
// WikiText-2 calibration slice and loss, on synthetic losses and the stories260K model.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/thread_pool.h"
#include "eval/calibration.h"
#include "eval/layer_search.h"
#include "eval/perplexity.h"
#include "policies/builtin_policies.h"
#include "test_paths.h"

namespace ts {
namespace {

const Model& stories() {
  static const auto model = Model::load(shared_path("models/stories260K.gguf"));
  return *model;
}

// Layers cost cost[l] each, and 1 and 2 together cost `clash` more: the one-shot search takes the
// two individually best (1, 2), the iterative one sees the clash in its second round.
double clashing_loss(const std::vector<uint32_t>& layers, double clash) {
  const double cost[] = {9, 0.1, 0.2, 0.3, 0.4};
  double loss = 0;
  for (uint32_t l : layers) loss += cost[l];
  const bool has1 = std::count(layers.begin(), layers.end(), 1u),
             has2 = std::count(layers.begin(), layers.end(), 2u);
  return loss + (has1 && has2 ? clash : 0.0);
}

TEST(LayerSearch, IterativeIsGreedyOnTheChosenSetOneShotRanksLayersAlone) {
  const std::vector<uint32_t> candidates{4, 1, 3, 2};
  size_t calls = 0;
  const LayerSetLoss loss = [&](const std::vector<uint32_t>& layers) {
    ++calls;
    EXPECT_TRUE(std::is_sorted(layers.begin(), layers.end()));
    return clashing_loss(layers, 1.0);
  };
  const LayerSearchResult it = search_layers(LayerSearchMethod::Iterative, candidates, 2, loss);
  EXPECT_EQ(it.order, (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(it.layers, (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(calls, layer_search_evaluations(LayerSearchMethod::Iterative, 4, 2));
  EXPECT_EQ(it.trials.size(), 4u + 3u);
  EXPECT_EQ(it.trials[4].layers, (std::vector<uint32_t>{1, 2}));  // round 2 tries each on top of {1}
  EXPECT_DOUBLE_EQ(it.trials[4].loss, 1.3);

  calls = 0;
  const LayerSearchResult os = search_layers(LayerSearchMethod::OneShot, candidates, 3, loss);
  EXPECT_EQ(os.order, (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(calls, layer_search_evaluations(LayerSearchMethod::OneShot, 4, 3));
  for (const LayerTrial& t : os.trials) EXPECT_EQ(t.layers.size(), 1u);
}

TEST(LayerSearch, TiesGoToTheLowerLayerAndBadCountsAreErrors) {
  const std::vector<uint32_t> candidates{3, 2, 1};
  const LayerSetLoss flat = [](const std::vector<uint32_t>&) { return 1.0; };
  EXPECT_EQ(search_layers(LayerSearchMethod::Iterative, candidates, 2, flat).order,
            (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(search_layers(LayerSearchMethod::OneShot, candidates, 2, flat).order,
            (std::vector<uint32_t>{1, 2}));
  EXPECT_THROW(search_layers(LayerSearchMethod::Iterative, candidates, 4, flat), Error);
  EXPECT_TRUE(search_layers(LayerSearchMethod::Iterative, candidates, 0, flat).layers.empty());
}

TEST(LayerSearch, LayerBudgetOfASparsity) {
  // SmolLM2 (30 layers): removal 10% / 20% -> 3 / 6 layers; OrthoRank at ratio 0.333 -> 4 / 9
  // (the paper's 15% / 30% of the layers).
  EXPECT_EQ(layers_for_sparsity(0.1, 30, 0.0), 3u);
  EXPECT_EQ(layers_for_sparsity(0.2, 30, 0.0), 6u);
  EXPECT_EQ(layers_for_sparsity(0.1, 30, 0.333), 4u);
  EXPECT_EQ(layers_for_sparsity(0.2, 30, 0.333), 9u);
  EXPECT_EQ(layers_for_sparsity(0.2, 40, 0.333), 12u);  // Llama-2-13B in the paper
  EXPECT_THROW(layers_for_sparsity(0.9, 5, 0.5), Error);
  EXPECT_THROW(layers_for_sparsity(1.0, 5, 0.0), Error);
}

std::string data_dir_with(const std::string& name, bool with_train) {
  const auto dir = std::filesystem::temp_directory_path() / ("ts_calib_" + name);
  std::filesystem::create_directories(dir / "wikitext2");
  std::ofstream(dir / "wikitext2" / "wiki.test.raw")
      << " = Test = \n\n Once upon a time there was a little girl . "
         "She liked to play in the park with her dog every day .\n";
  if (with_train)
    std::ofstream(dir / "wikitext2" / "wiki.train.raw") << " The cat sat on the mat and slept .\n";
  else
    std::filesystem::remove(dir / "wikitext2" / "wiki.train.raw");
  return dir.string();
}

TEST(Calibration, SliceIsTheTrainHeadElseTheTestTail) {
  const Tokenizer& tok = stories().tokenizer();
  const std::string test_dir = data_dir_with("tail", false);
  const CalibrationSlice tail = wikitext2_calibration_slice(stories(), test_dir, 2, 5);
  const std::vector<int32_t> all = tok.encode(
      " = Test = \n\n Once upon a time there was a little girl . She liked to play in the park with "
      "her dog every day .\n",
      false, false);
  ASSERT_FALSE(tail.train_split);
  EXPECT_EQ(tail.file_tokens, all.size());
  EXPECT_EQ(tail.offset, all.size() - 10);
  EXPECT_EQ(tail.tokens, std::vector<int32_t>(all.end() - 10, all.end()));

  const CalibrationSlice head = wikitext2_calibration_slice(stories(), data_dir_with("head", true), 1, 4);
  ASSERT_TRUE(head.train_split);
  EXPECT_EQ(head.offset, 0u);
  const std::vector<int32_t> train = tok.encode(" The cat sat on the mat and slept .\n", false, false);
  EXPECT_EQ(head.tokens, std::vector<int32_t>(train.begin(), train.begin() + 4));
  EXPECT_THROW(wikitext2_calibration_slice(stories(), test_dir, 100, 100), Error);
}

TEST(Calibration, LossIsTheWindowsMeanNllAndLeavesTheTransformerDense) {
  const CalibrationSlice s = wikitext2_calibration_slice(stories(), data_dir_with("loss", false), 2, 12);
  ThreadPool pool(1);
  Transformer tf(stories(), pool, 12);
  const double dense = calibration_loss(tf, s, {});
  EXPECT_EQ(tf.n_past(), 0u);
  const PerplexityResult direct = perplexity_strided(
      tf, s.tokens, 12, 12, 0, [](size_t, const NllAccumulator&, std::span<const double>) {});
  EXPECT_EQ(direct.acc.count, 22u);  // 2 windows x 11 scored tokens
  EXPECT_NEAR(dense, std::log(direct.acc.ppl()), 1e-9);
  tf.truncate(0);
  const std::vector<std::string> removal{"sleb:layers=2"};
  const double removed = calibration_loss(tf, s, removal);
  EXPECT_NE(removed, dense);
  EXPECT_EQ(tf.policies(), nullptr);
  EXPECT_EQ(calibration_loss(tf, s, {}), dense) << "deterministic, and the policy is gone";
}

}  // namespace
}  // namespace ts
