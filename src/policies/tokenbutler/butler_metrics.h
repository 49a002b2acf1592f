#pragma once
// How well a predictor ranks tokens like the LLM's attention (paper 001 §5, Fig. 3/4):
//   Recall@K%: for a query row i of a predicted (layer, head), k = ceil((i+1) K/100); the share of
//     the true top-k keys (by the engine's logits) among the predictor's top-k. Averaged over
//     (layer, head) and the rows sampled (every `row_step`-th row from `min_row` on).
//   Top-50% accuracy: the authors' token classification, on the last row of each sequence only:
//     |top-half(predicted) ∩ top-half(true)| / (n/2).
#include <cstdint>
#include <span>
#include <vector>

#include "policies/tokenbutler/butler_targets.h"

namespace ts {

struct RecallReport {
  std::vector<double> percents;  // K values
  std::vector<double> recall;    // mean Recall@K%, same order
  double top50_accuracy = 0.0;
  size_t sequences = 0;
};

class RecallMeter {
 public:
  RecallMeter(const Model& model, ThreadPool& pool, const ButlerWeights& predictor, size_t max_len,
              std::vector<double> percents = {1, 5, 10, 30, 50}, size_t min_row = 63, size_t row_step = 16);
  // Scores one sequence (starting at position 0).
  void add(std::span<const int32_t> tokens);
  RecallReport report() const;

 private:
  const ButlerWeights& predictor_;
  Transformer llm_;
  AttentionCapture* capture_ = nullptr;
  std::vector<double> percents_, recall_sum_;
  size_t min_row_, row_step_, rows_ = 0, sequences_ = 0;
  double top50_sum_ = 0.0;
  size_t top50_count_ = 0;
};

}  // namespace ts
