#include "policies/oracle/oracle.h"

#include "runtime/kv_cache.h"

namespace ts {

void OracleKeys::select_keys(const KeyQuery& q, std::span<const uint32_t> candidates,
                             std::vector<uint32_t>& keys) const {
  thread_local std::vector<float> scores;
  scores.resize(candidates.size());
  for (size_t j = 0; j < candidates.size(); ++j)
    scores[j] = q.cache->key_dot(q.layer, candidates[j], q.kv_head, q.q.data());
  select_top_keys(candidates, scores, budget_.budget(q.pos), budget_.sinks(), keys);
}

}  // namespace ts
