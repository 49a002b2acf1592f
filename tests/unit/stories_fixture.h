#pragma once
// The small real model most runtime tests run on (stories260K from ../shared), and prompts for it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "model/model.h"
#include "test_paths.h"

namespace ts {

inline const Model& stories() {
  static const auto model = Model::load(shared_path("models/stories260K.gguf"));
  return *model;
}

// n ordinary token ids (past the control tokens), reproducible from the seed.
inline std::vector<int32_t> random_tokens(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(3 + rng() % 500);
  return t;
}

// Logits of two runs that attend to the same keys in a different order of float sums: dense
// prefill attends in query tiles (a tile's shared keys, then each row's own), attention over key
// lists row by row. Equal up to float reordering, which a later layer's F16 K/V rounding can
// amplify: on stories260K the spread is median 3e-4, p99 1e-2 (DecodeMatchesBatchedPrefill...);
// a wrong key or weight moves logits by far more.
inline void expect_same_attention(const std::vector<float>& got, const std::vector<float>& want,
                                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double total = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 2e-2f) << what << " at " << i;
    total += std::fabs(got[i] - want[i]);
  }
  EXPECT_LT(total / static_cast<double>(got.size()), 1e-3) << what << ": mean |difference|";
}

}  // namespace ts
