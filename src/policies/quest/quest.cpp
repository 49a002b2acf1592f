#include "policies/quest/quest.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/model.h"
#include "runtime/kv_cache.h"

namespace ts {

QuestKeys::QuestKeys(PolicyOptions& options)
    : Policy(options.spec()),
      budget_(options, -1),
      page_(options.take_uint("page", 1, 1u << 16).value_or(16)) {}

void QuestKeys::bind(const Model& model) {
  budget_.bind(model, name());
  kv_dim_ = size_t{model.config().n_kv_heads} * model.config().head_dim;
  key_.resize(kv_dim_);
  layers_.assign(model.config().n_layers, {});
}

void QuestKeys::truncate(size_t n_past) {
  for (LayerPages& l : layers_) l.ready = std::min(l.ready, n_past / page_);
}

// Bounds of the pages complete before the batch's last query's page, from the cached keys.
void QuestKeys::prepare_keys(const QueryRows& q) {
  LayerPages& lp = layers_[q.layer];
  TS_CHECK(q.cache->holds_all(q.layer), "policy ", name(), ": the cache of layer ", q.layer,
           " has holes (another policy evicted or skipped tokens)");
  const size_t last_pos = q.pos0 + (*q.rows)[q.rows->size() - 1];
  const size_t need = last_pos / page_;
  if (lp.bounds.size() < need * 2 * kv_dim_) lp.bounds.resize(std::max(need, 2 * lp.ready + 8) * 2 * kv_dim_);
  for (size_t p = lp.ready; p < need; ++p) {
    float* lo = &lp.bounds[p * 2 * kv_dim_];
    float* hi = lo + kv_dim_;
    std::fill(lo, lo + kv_dim_, INFINITY);
    std::fill(hi, hi + kv_dim_, -INFINITY);
    for (size_t j = p * page_; j < (p + 1) * page_; ++j) {
      q.cache->read_key(q.layer, j, key_.data());
      for (size_t c = 0; c < kv_dim_; ++c) {
        lo[c] = std::min(lo[c], key_[c]);
        hi[c] = std::max(hi[c], key_[c]);
      }
    }
  }
  lp.ready = std::max(lp.ready, need);
}

void QuestKeys::select_keys(const KeyQuery& q, std::span<const uint32_t> candidates,
                            std::vector<uint32_t>& keys) const {
  const LayerPages& lp = layers_[q.layer];
  const size_t hd = q.q.size(), current = q.pos / page_;
  // The current page's tokens count towards the budget; earlier pages fill the rest.
  const size_t budget = budget_.budget(q.pos), in_current = q.pos % page_ + 1;
  const size_t more_pages = budget > in_current ? (budget - in_current + page_ - 1) / page_ : 0;
  thread_local std::vector<uint32_t> pages, chosen;
  thread_local std::vector<float> scores;
  thread_local std::vector<uint8_t> selected;
  pages.resize(current);
  scores.resize(current);
  for (size_t p = 0; p < current; ++p) {
    const float* lo = &lp.bounds[p * 2 * kv_dim_ + q.kv_head * hd];
    const float* hi = lo + kv_dim_;
    float s = 0.0f;
    for (size_t c = 0; c < hd; ++c) s += std::max(q.q[c] * lo[c], q.q[c] * hi[c]);
    pages[p] = static_cast<uint32_t>(p);
    scores[p] = s;
  }
  select_top_keys(pages, scores, more_pages, 0, chosen);
  selected.assign(current + 1, 0);
  selected[current] = 1;
  for (uint32_t p : chosen) selected[p] = 1;
  keys.clear();
  for (uint32_t j : candidates)
    if (j < budget_.sinks() || selected[j / page_]) keys.push_back(j);
}

}  // namespace ts
