#include "policies/orthorank/context_rank.h"

#include <algorithm>

#include "core/error.h"

namespace ts {

void ContextRank::add(size_t pos0, std::span<const float> scores) {
  TS_CHECK(pos0 == sorted_.size(), "orthorank: scores for position ", pos0, " but ", sorted_.size(),
           " positions are ranked (a sequence must start at position 0)");
  const auto middle = static_cast<std::ptrdiff_t>(sorted_.size());
  for (size_t i = 0; i < scores.size(); ++i) sorted_.emplace_back(scores[i], static_cast<uint32_t>(pos0 + i));
  std::sort(sorted_.begin() + middle, sorted_.end());
  std::inplace_merge(sorted_.begin(), sorted_.begin() + middle, sorted_.end());
}

bool ContextRank::ranks_within(float score, size_t pos, size_t keep) const {
  const auto at =
      std::lower_bound(sorted_.begin(), sorted_.end(), std::pair(score, static_cast<uint32_t>(pos)));
  return static_cast<size_t>(at - sorted_.begin()) < keep;
}

void ContextRank::truncate(size_t n_past) {
  std::erase_if(sorted_, [&](const auto& e) { return e.second >= n_past; });
}

}  // namespace ts
