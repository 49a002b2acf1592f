#include "runtime/decision_log.h"

namespace ts {

void DecisionLog::clear() {
  batches.clear();
  layers.clear();
  evictions.clear();
}

double DecisionLog::ffn_fraction() const {
  double tokens = 0, skipped = 0;
  for (const BatchRecord& b : batches) tokens += double(b.n_tok) * n_layers;
  for (const LayerRecord& r : layers)
    for (uint8_t f : r.flags) skipped += (f & kRanFfn) ? 0 : 1;
  return tokens > 0 ? 1.0 - skipped / tokens : 1.0;
}

}  // namespace ts
