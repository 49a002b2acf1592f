#pragma once
// What the key-selecting policies share (TokenButler, Oracle, Quest, H2O, SnapKV, StreamingLLM;
// paper 001's uniform token sparsity): at position pos a query head attends to
// budget(pos) = min(pos + 1, ceil((pos + 1) * keep)) chosen keys plus the first `sinks` positions
// (the paper's 4 anchor tokens, in addition to the budget), on layers >= first_layer (layer 0
// stays dense). Options: keep=F (0, 1], sinks=N (default 4), first_layer=N (default 1).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/policy.h"

namespace ts {

class KeyBudget {
 public:
  // keep_default < 0: keep= is required.
  KeyBudget(PolicyOptions& options, double keep_default);
  static PolicyOptionList options();  // declared once: parser, help, Python and README

  // The SelectKeys claim for layers first_layer.. of the model.
  void bind(const Model& model, const std::string& policy);
  std::vector<uint32_t> layers() const { return layers_; }
  bool covers(size_t layer) const { return layer >= first_layer_; }

  double keep() const { return keep_; }
  bool keep_given() const { return keep_given_; }
  size_t sinks() const { return sinks_; }
  size_t budget(size_t pos) const {
    const auto k = static_cast<size_t>(std::ceil(static_cast<double>(pos + 1) * keep_));
    return std::min(pos + 1, k);
  }

 private:
  double keep_ = 1.0;
  bool keep_given_ = false;
  size_t sinks_ = 4;
  uint32_t first_layer_ = 1;
  std::vector<uint32_t> layers_;
};

// keys = the `k` candidates with the largest scores (scores[j] belongs to candidates[j]; ties go
// to the earlier position) together with every candidate below `sinks`, ascending as the
// candidates are.
void select_top_keys(std::span<const uint32_t> candidates, std::span<const float> scores, size_t k,
                     size_t sinks, std::vector<uint32_t>& keys);

}  // namespace ts
