#include "policies/streaming/streaming.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "runtime/kv_cache.h"

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

size_t StreamingKeys::window_start(size_t pos) const {
  // pos + 1 - window with window = budget(pos) - sinks: budget grows by at most 1 a position, so
  // this never moves back.
  const size_t sinks = budget_.sinks(), budget = budget_.budget(pos);
  const size_t window = window_ ? *window_ : budget > sinks ? budget - sinks : 0;
  return pos + 1 > window ? pos + 1 - window : 0;
}

void StreamingKeys::truncate(size_t n_past) {
  if (n_past == 0) evicted_to_ = 0;
  TS_CHECK(window_start(n_past) >= evicted_to_, "policy ", name(), ": positions before ", evicted_to_,
           " were evicted, so the sequence cannot resume at ", n_past, " (rewind_point gives 0)");
}

void StreamingKeys::evict(const KvCache& cache, Evictions& out) {
  // The next query's window, at most up to the positions written (a window of 0 starts past them).
  const size_t sinks = budget_.sinks(), from = std::max(evicted_to_, sinks);
  const size_t to = std::min(window_start(cache.size()), cache.size());
  if (to <= from) return;
  const size_t held = cache.size() - (from - sinks);
  if (!worth_evicting(to - from, held)) return;
  std::vector<uint32_t> gone(to - from);
  std::iota(gone.begin(), gone.end(), static_cast<uint32_t>(from));
  for (const uint32_t layer : budget_.layers()) out.add(layer, gone);
  evicted_to_ = to;
}

void StreamingKeys::select_keys(const KeyQuery& q, std::span<const uint32_t> candidates,
                                std::vector<uint32_t>& keys) const {
  const size_t sinks = budget_.sinks();
  // The candidates (ascending) below `sinks`, then those from the window's start: two runs, copied whole.
  const size_t recent_from = window_start(q.pos);
  const auto sinks_end = std::ranges::lower_bound(candidates, sinks);
  const auto recent = std::max(sinks_end, std::ranges::lower_bound(candidates, recent_from));
  keys.assign(candidates.begin(), sinks_end);
  keys.insert(keys.end(), recent, candidates.end());
}

}  // namespace ts
