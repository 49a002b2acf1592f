#pragma once
// A test policy that records the keys every (layer, position, query head) attended and their
// attention probabilities, from the attention observer hook.
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "runtime/policy.h"

namespace ts {

class KeyRecorder final : public Policy {
 public:
  KeyRecorder() : Policy({"keys", {}}) {}
  std::vector<HookClaim> claims() const override { return {{Hook::ObserveAttention, {}}}; }
  void observe_attention(const AttentionRows& a) override {
    for (size_t i = 0; i < a.rows->size(); ++i)
      for (size_t h = 0; h < a.n_heads; ++h) {
        const auto k = a.keys_of(i, h);
        const auto p = a.probs_of(i, h);
        keys[{a.layer, a.pos0 + (*a.rows)[i], h}] = std::vector<uint32_t>(k.begin(), k.end());
        probs[{a.layer, a.pos0 + (*a.rows)[i], h}] = std::vector<float>(p.begin(), p.end());
      }
  }
  std::map<std::tuple<size_t, size_t, size_t>, std::vector<uint32_t>> keys;
  std::map<std::tuple<size_t, size_t, size_t>, std::vector<float>> probs;
};

}  // namespace ts
