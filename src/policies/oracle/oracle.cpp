#include "policies/oracle/oracle.h"

#include "kernels/simd_ops.h"
#include "runtime/kv_cache.h"

namespace ts {

void OracleKeys::select_keys(const KeyQuery& q, std::span<const uint32_t> candidates,
                             std::vector<uint32_t>& keys) const {
  thread_local std::vector<float> scores;
  scores.resize(candidates.size());
  const size_t hd = q.q.size();
  for (size_t j = 0; j < candidates.size(); ++j)
    scores[j] = ops().dot_f16_f32(q.cache->key(q.layer, candidates[j]) + q.kv_head * hd, q.q.data(), hd);
  select_top_keys(candidates, scores, budget_.budget(q.pos), budget_.sinks(), keys);
}

}  // namespace ts
