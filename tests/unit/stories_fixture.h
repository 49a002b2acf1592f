#pragma once
// The small real model most runtime tests run on (stories260K from ../shared), and prompts for it.
#include <cstdint>
#include <random>
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

}  // namespace ts
