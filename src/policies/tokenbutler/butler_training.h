#pragma once
// Training the TokenButler predictor against the engine's own attention logits (paper 001 §3,
// the authors' recipe where the paper is silent): the LLM is frozen and run on each training
// chunk; the predictor's MSE to the logits of layers >= 1 (causal entries) is minimised with
// AdamW (betas 0.9/0.999, eps 1e-8, weight decay 0.01), linear warm-up over the first 10% of the
// steps then cosine decay to 0, gradient clipping at norm 20 and steps skipped above 20000.
// Batch size 1 chunk. The chunk of step s, and with loss_rows its query rows in the loss (a
// sample that makes long chunks affordable: the loss costs n^2 per (layer, head)), are fixed by
// (seed, s), so a run resumed from a checkpoint continues bit for bit.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "policies/tokenbutler/butler_file.h"
#include "policies/tokenbutler/butler_targets.h"

namespace ts {

struct ButlerTrainOptions {
  size_t steps = 0;
  size_t loss_rows = 0;  // query rows of a chunk in its loss, drawn per step (0: all)
  double lr = 1e-3, warmup = 0.1, weight_decay = 0.01, clip = 20.0, skip_above = 20000.0;
  uint64_t seed = 1;
};

struct AdamState {
  std::vector<std::vector<float>> m, v;  // per tensor, ButlerWeights::for_each order
};

class ButlerTrainer {
 public:
  // chunks: training sequences of equal length (tokens), each run from position 0.
  ButlerTrainer(const Model& model, ThreadPool& pool, const ButlerConfig& config, ButlerTrainOptions options,
                std::vector<std::vector<int32_t>> chunks);

  // One optimizer step on the chunk of step step(); returns its loss (before the update).
  double step();
  size_t steps_done() const { return step_; }
  double lr_at(size_t step) const;
  double last_grad_norm() const { return grad_norm_; }
  const ButlerWeights& weights() const { return weights_; }

  // Starts from a trained predictor's weights (fine-tuning, e.g. on longer chunks) with a fresh
  // optimizer state; before the first step.
  void start_from(const std::string& path);
  // Checkpoint: weights, AdamW moments and the step, in the predictor file format (F32).
  void save_checkpoint(const std::string& path, const std::map<std::string, std::string>& metadata) const;
  // Continues a run from a checkpoint made with the same config and options. reschedule: the
  // checkpoint may come from a run with another step count; this run's schedule applies from the
  // checkpoint's step on (then the result is not that of either uninterrupted run).
  void resume(const std::string& path, bool reschedule = false);

 private:
  const std::vector<int32_t>& chunk_of(size_t step) const;

  ButlerTrainOptions options_;
  ThreadPool& pool_;
  std::vector<std::vector<int32_t>> chunks_;
  Transformer llm_;
  AttentionCapture* capture_ = nullptr;
  ButlerWeights weights_, grad_;
  AdamState adam_;
  size_t step_ = 0;
  double grad_norm_ = 0.0;
};

}  // namespace ts
