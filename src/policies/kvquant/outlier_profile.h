#pragma once
// Stable outliers (massive activations) of the residual stream, for KVSink: per decoder block,
// the channels with the largest |h| at the block's output, and the model's sink channel and its
// emergence layer, stored as JSON:
//   {"format": "tokensieve-kvsink-profile", "version": 1, "model": "...", "model_hash": "fnv1a64:...",
//    "emergence_layer": 3, "channel": 123, "channels": [123, 45], "layers": [...per-block peaks...],
//    "calibration": {...}, "ranges": [...static KV ranges per exclusion rule (static_ranges.h)...]}
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"
#include "policies/kvquant/static_ranges.h"

namespace ts {

struct ChannelPeak {
  uint32_t channel = 0;
  float max_abs = 0;      // max over tokens (and texts) of |h[t, channel]|
  uint32_t position = 0;  // the token position of that maximum
};

// The output of decoder block `layer` (the input of block layer + 1; the last block's output
// feeds the final norm and is not observed).
struct BlockOutliers {
  uint32_t layer = 0;
  float median_abs = 0;          // median |h| over all tokens and channels
  std::vector<ChannelPeak> top;  // largest max_abs first
};

// Runs each text (token ids, one sequence each) densely and ranks every channel per block.
std::vector<BlockOutliers> measure_outliers(const Model& model, ThreadPool& pool,
                                            std::span<const std::vector<int32_t>> texts, size_t top_n);

struct OutlierProfile {
  std::string model_name, model_hash;
  uint32_t emergence_layer = 0, channel = 0;
  std::vector<uint32_t> channels;  // channels in the top 3 of at least half the observed blocks
  std::vector<BlockOutliers> layers;
  std::vector<CalibratedRanges> ranges;  // static KV ranges (calibrate kvsink), none before
  std::string calibration_json;          // where the ranges come from (JSON object), or empty
};

// The sink channel is the one that is the top channel of the most blocks (ties: the larger peak);
// the emergence layer is the first block whose output reaches half that channel's peak.
OutlierProfile choose_sink_channel(const Model& model, std::vector<BlockOutliers> layers);
void write_outlier_profile(const std::string& path, const OutlierProfile& p);
OutlierProfile read_outlier_profile(const std::string& path);
// The profile at `path` for `model`: an error naming both models unless it was calibrated on this
// one (the same model_fingerprint: tensor names, types, shapes and bytes).
OutlierProfile read_outlier_profile(const std::string& path, const Model& model);

}  // namespace ts
