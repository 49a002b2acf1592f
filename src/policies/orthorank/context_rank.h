#pragma once
// OrthoRank's decision rule at one layer: a token runs the layer iff its score ranks among the
// ⌊ratio·N⌋ smallest of the N tokens of the sequence so far, ties going to the earlier position.
// Earlier tokens keep the scores they were given. On a whole prompt this is Algorithm 1 (top-k
// smallest, k = int(p·N)); on each later token it is the paper's decode rule ("compare each token's
// inner product with the accumulated context").
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace ts {

class ContextRank {
 public:
  // Scores of positions pos0, pos0+1, ...; pos0 must be size() (the sequence continues).
  void add(size_t pos0, std::span<const float> scores);
  // Whether (score, pos), already added, is among the `keep` smallest.
  bool ranks_within(float score, size_t pos, size_t keep) const;
  size_t size() const { return sorted_.size(); }
  void truncate(size_t n_past);

 private:
  std::vector<std::pair<float, uint32_t>> sorted_;  // (score, position), ascending
};

}  // namespace ts
