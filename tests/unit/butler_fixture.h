#pragma once
// A small TokenButler predictor shaped for stories260K (random weights), for tests that run the
// tokenbutler policy on the stories fixture.
#include <gtest/gtest.h>

#include <string>

#include "policies/tokenbutler/butler_file.h"
#include "stories_fixture.h"

namespace ts {

inline ButlerConfig stories_config() {
  const ModelConfig& m = stories().config();
  ButlerConfig c;
  c.n_embd = m.n_embd;
  c.n_reduced = m.n_embd / 8;
  c.n_heads = 4;
  c.n_layers = m.n_layers;
  c.n_query_heads = m.n_heads;
  c.imp_dim = 4;
  c.inter = 8;
  c.rope_base = m.rope_base;
  return c;
}

// Writes the predictor (seed 21) to a temporary file and returns its path.
inline std::string stories_predictor() {
  const std::string path = testing::TempDir() + "/butler_stories.safetensors";
  save_butler(path, {ButlerWeights::init(stories_config(), 21), {}, {}}, false);
  return path;
}

}  // namespace ts
