#include "policies/evicting_keys.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/model.h"
#include "runtime/kv_cache.h"

namespace ts {

EvictingKeys::EvictingKeys(PolicyOptions& options) : Policy(options.spec()), budget_(options, -1) {}

void EvictingKeys::bind(const Model& model) {
  budget_.bind(model, name());
  n_heads_ = model.config().n_heads;
  group_ = model.config().n_heads / model.config().n_kv_heads;
  heads_.assign(size_t{model.config().n_layers} * n_heads_, {});
  n_seen_ = 0;
}

void EvictingKeys::truncate(size_t n_past) {
  TS_CHECK(n_past == 0 || n_past >= n_seen_, "policy ", name(), ": eviction state cannot be rewound to ",
           n_past, " of ", n_seen_, " positions");
  if (n_past == 0) {
    for (HeadState& s : heads_) s = {};
    n_seen_ = 0;
  }
}

void EvictingKeys::prepare_keys(const QueryRows& q) {
  const size_t n_rows = q.rows->size();
  lists_pos0_ = q.pos0;
  const size_t span = n_rows ? (*q.rows)[n_rows - 1] + 1 : 0;
  row_lists_.resize(std::max(row_lists_.size(), span * n_heads_));
  collect_observed_ = n_rows == 1 && collects_observed_attention();
  for (size_t h = 0; h < n_heads_; ++h) {
    HeadState& s = heads_[q.layer * n_heads_ + h];
    for (size_t i = 0; i < n_rows; ++i)
      step(s, q, i, h, row_lists_[(*q.rows)[i] * n_heads_ + h], !collect_observed_);
  }
  if (n_rows) n_seen_ = std::max(n_seen_, q.pos0 + (*q.rows)[n_rows - 1] + 1);
}

void EvictingKeys::step(HeadState& s, const QueryRows& q, size_t row, size_t head,
                        std::vector<uint32_t>& keys, bool collect_now) {
  const size_t pos = q.pos0 + (*q.rows)[row], sinks = budget_.sinks();
  if (s.attention.size() <= pos) s.attention.resize(std::max<size_t>(pos + 1, 2 * s.attention.size()), 0.0f);
  s.active.push_back(static_cast<uint32_t>(pos));
  // Evict down to the budget: the lowest importance among non-sink, non-protected positions.
  const size_t budget = budget_.budget(pos);
  const size_t recent = protected_recent(budget);
  size_t n_sinks = 0;
  while (n_sinks < s.active.size() && s.active[n_sinks] < sinks) ++n_sinks;
  while (s.active.size() - n_sinks > budget) {
    size_t victim = s.active.size();
    float lowest = INFINITY;
    for (size_t a = n_sinks; a < s.active.size() && s.active[a] + recent <= pos; ++a) {
      const float v = importance(s, s.active[a], pos);
      if (v < lowest) lowest = v, victim = a;
    }
    if (victim == s.active.size()) break;  // everything left is protected
    s.active.erase(s.active.begin() + static_cast<std::ptrdiff_t>(victim));
  }
  keys = s.active;
  if (!collect_now) return;
  // This step's attention over the active set, as the attention will compute it.
  const size_t hd = q.head_dim, kvh = head / group_;
  const std::span<const float> qv = q.query(row, head);
  logits_.resize(keys.size());
  float mx = -INFINITY;
  for (size_t j = 0; j < keys.size(); ++j) {
    logits_[j] = q.cache->key_dot(q.layer, keys[j], kvh, qv.data());
    mx = std::max(mx, logits_[j]);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  float sum = 0.0f;
  for (float& x : logits_) sum += (x = std::exp((x - mx) * scale));
  for (float& x : logits_) x /= sum;
  collect(s, keys, logits_);
}

void EvictingKeys::observe_attention(const AttentionRows& a) {
  if (!collect_observed_) return;
  collect_observed_ = false;
  for (size_t h = 0; h < n_heads_; ++h) collect(heads_[a.layer * n_heads_ + h], a.keys_of(0, h), a.probs_of(0, h));
}

void EvictingKeys::select_keys(const KeyQuery& q, std::span<const uint32_t> candidates,
                               std::vector<uint32_t>& keys) const {
  const std::vector<uint32_t>& chosen = row_lists_[(q.pos - lists_pos0_) * n_heads_ + q.head];
  keys.clear();
  std::ranges::set_intersection(chosen, candidates, std::back_inserter(keys));
}

}  // namespace ts
