#include "policies/tokenbutler/butler_metrics.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include "core/error.h"

namespace ts {
namespace {

// Indices 0..n-1 ordered by descending score (ties: earlier first).
void rank(const float* s, size_t n, std::vector<uint32_t>& order) {
  order.resize(n);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return s[a] > s[b]; });
}

// |first k of a ∩ first k of b| for every k in ks (ascending), with one pass.
void prefix_overlaps(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b,
                     std::span<const size_t> ks, std::vector<size_t>& out, std::vector<uint8_t>& seen) {
  seen.assign(a.size(), 0);
  out.assign(ks.size(), 0);
  size_t common = 0, next = 0;
  for (size_t p = 0; p < a.size() && next < ks.size(); ++p) {
    // seen bit 1: in a's prefix, bit 2: in b's prefix.
    if ((seen[a[p]] |= 1) == 3) ++common;
    if ((seen[b[p]] |= 2) == 3) ++common;
    while (next < ks.size() && ks[next] == p + 1) out[next++] = common;
  }
}

}  // namespace

RecallMeter::RecallMeter(const Model& model, ThreadPool& pool, const ButlerWeights& predictor, size_t max_len,
                         std::vector<double> percents, size_t min_row, size_t row_step)
    : predictor_(predictor),
      llm_(model, pool, max_len),
      percents_(std::move(percents)),
      recall_sum_(percents_.size(), 0.0),
      min_row_(min_row),
      row_step_(row_step) {
  auto capture = std::make_unique<AttentionCapture>(predictor.config.first_layer);
  capture_ = capture.get();
  std::vector<std::unique_ptr<Policy>> policies;
  policies.push_back(std::move(capture));
  llm_.set_policies(std::make_unique<PolicyStack>(std::move(policies), model));
}

void RecallMeter::add(std::span<const int32_t> tokens) {
  run_with_capture(llm_, tokens);
  ButlerNet net(predictor_, ops());
  ButlerCache cache;
  ButlerActs acts;
  net.forward(capture_->input().data(), tokens.size(), cache, acts, /*for_backward=*/false);
  const size_t n = tokens.size();
  std::vector<uint32_t> by_true, by_pred;
  std::vector<size_t> ks(percents_.size()), overlap;
  std::vector<uint8_t> seen;
  size_t rows = 0;
  for_each_logit_pair(predictor_.config, llm_, *capture_, acts, [&](const LogitPair& p) {
    for (size_t i = min_row_; i < n; i += row_step_) {
      rank(p.target + i * n, i + 1, by_true);
      rank(p.predicted + i * n, i + 1, by_pred);
      for (size_t q = 0; q < percents_.size(); ++q)
        ks[q] = std::max<size_t>(1, static_cast<size_t>(std::ceil(double(i + 1) * percents_[q] / 100.0)));
      prefix_overlaps(by_true, by_pred, ks, overlap, seen);
      for (size_t q = 0; q < percents_.size(); ++q) recall_sum_[q] += double(overlap[q]) / double(ks[q]);
      ++rows;
    }
    const size_t last = n - 1, half = std::max<size_t>(1, n / 2);
    rank(p.target + last * n, n, by_true);
    rank(p.predicted + last * n, n, by_pred);
    const size_t k_half[] = {half};
    prefix_overlaps(by_true, by_pred, k_half, overlap, seen);
    top50_sum_ += double(overlap[0]) / double(half);
    ++top50_count_;
  });
  rows_ += rows;
  ++sequences_;
}

RecallReport RecallMeter::report() const {
  RecallReport r;
  r.percents = percents_;
  for (double s : recall_sum_) r.recall.push_back(rows_ ? s / double(rows_) : 0.0);
  r.top50_accuracy = top50_count_ ? top50_sum_ / double(top50_count_) : 0.0;
  r.sequences = sequences_;
  return r;
}

}  // namespace ts
