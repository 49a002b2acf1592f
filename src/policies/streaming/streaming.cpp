#include "policies/streaming/streaming.h"

#include <algorithm>

#include "core/error.h"

namespace ts {

PolicyOptionList StreamingKeys::options() {
  return PolicyOptionList{
             integer_option("window", 0, 1ull << 32, "", "recent positions kept, instead of keep")} +
         KeyBudget::options();
}

StreamingKeys::StreamingKeys(PolicyOptions& options)
    : Policy(options.spec()), window_(options.integer("window")), budget_(options, 1.0) {
  TS_CHECK(window_.has_value() != budget_.keep_given(), "policy ", name(),
           ": give either window=N or keep=F");
}

void StreamingKeys::select_keys(const KeyQuery& q, std::span<const uint32_t> candidates,
                                std::vector<uint32_t>& keys) const {
  const size_t sinks = budget_.sinks();
  const size_t budget = budget_.budget(q.pos);
  const size_t window = window_ ? *window_ : budget > sinks ? budget - sinks : 0;
  // The candidates (ascending) below `sinks`, then those after pos - window: two runs, copied whole.
  const size_t recent_from = q.pos + 1 > window ? q.pos + 1 - window : 0;
  const auto sinks_end = std::ranges::lower_bound(candidates, sinks);
  const auto recent = std::max(sinks_end, std::ranges::lower_bound(candidates, recent_from));
  keys.assign(candidates.begin(), sinks_end);
  keys.insert(keys.end(), recent, candidates.end());
}

}  // namespace ts
