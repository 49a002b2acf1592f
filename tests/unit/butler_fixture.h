#pragma once
// Small TokenButler predictors with random weights, for tests that run the tokenbutler policy on a
// model without a trained predictor (stories260K, or Qwen in the registry walk).
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "policies/tokenbutler/butler_file.h"
#include "stories_fixture.h"

namespace ts {

// A small predictor shape for any model: E/8 reduced width in 4 heads, d = 4, I = 8.
inline ButlerConfig small_butler_config(const Model& model) {
  const ModelConfig& m = model.config();
  ButlerConfig c;
  c.n_embd = m.n_embd;
  c.n_reduced = m.n_embd / 8;
  c.n_heads = 4;
  c.n_layers = m.n_layers;
  c.n_query_heads = m.n_heads;
  c.imp_dim = 4;
  c.inter = 8;
  c.rope_base = m.ropes[0].base;
  return c;
}

inline ButlerConfig stories_config() { return small_butler_config(stories()); }

// Writes a predictor with random weights (seed) shaped for the model to a temporary file; its path.
// The name has the process (ctest runs tests side by side) and the model's shape.
inline std::string random_predictor(const Model& model, uint64_t seed) {
  const ModelConfig& m = model.config();
  const std::string path = testing::TempDir() + "/butler_" + std::to_string(getpid()) + "_" +
                           std::to_string(m.n_embd) + "x" + std::to_string(m.n_layers) + "x" +
                           std::to_string(m.n_heads) + "_" + std::to_string(seed) + ".safetensors";
  save_butler(path, {ButlerWeights::init(small_butler_config(model), seed), {}, {}}, false);
  return path;
}

// The stories260K predictor (seed 21).
inline std::string stories_predictor() { return random_predictor(stories(), 21); }

}  // namespace ts
