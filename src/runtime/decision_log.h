#pragma once
// What the policies decided during one request, layer by layer, for --json reports and heatmaps.
// Filled only while a log is attached (Transformer::set_decision_log); a layer of a batch is
// recorded when some policy owns a decision there, and every other layer ran dense.
#include <cstdint>
#include <string>
#include <vector>

namespace ts {

// Bits per token of a batch at one layer.
enum TokenFlag : uint8_t {
  kRanAttention = 1,     // ran Q/attention/O
  kRanFfn = 2,           // ran the FFN
  kKvCached = 4,         // its K/V entered this layer's cache
  kKvFullPrecision = 8,  // ... pinned at full precision
  kKvLowPrecision = 16,  // ... coded at the mixed-precision format's low width
};
inline constexpr uint8_t kDenseToken = kRanAttention | kRanFfn | kKvCached;

struct BatchRecord {
  uint32_t pos0 = 0, n_tok = 0;  // positions pos0 .. pos0 + n_tok - 1 ran together
};

struct LayerRecord {
  uint32_t batch = 0;  // index into DecisionLog::batches
  uint32_t layer = 0;
  std::vector<uint8_t> flags;  // per token of the batch: TokenFlag bits
  std::vector<float> scores;   // per token, when the deciding policy reported scores
  std::vector<uint32_t>
      keys_attended;  // per (token, query head) when a policy selected keys; 0: no attention
  // With DecisionLog::key_lists: per (token, query head), the key positions it attended (ascending).
  std::vector<std::vector<uint32_t>> key_lists;
};

struct EvictionRecord {
  uint32_t batch = 0, layer = 0;  // after this batch
  std::vector<uint32_t> positions;
};

struct DecisionLog {
  std::vector<std::string> policies;  // the attached policies' specs, in order
  uint32_t n_layers = 0, n_heads = 0;
  std::vector<BatchRecord> batches;
  std::vector<LayerRecord> layers;
  std::vector<EvictionRecord> evictions;
  // Also record which keys each (token, query head) attended where a policy selected them: what an
  // independent check of the selection needs (tools/crosscheck.py), at a cost of every key listed.
  bool key_lists = false;

  // Forgets the recorded request; keeps policies and shapes.
  void clear();
  // Fraction of (token, layer) pairs that ran the FFN: 1 - the token-layer sparsity of the
  // OrthoRank paper (unrecorded layers count as dense).
  double ffn_fraction() const;
};

}  // namespace ts
