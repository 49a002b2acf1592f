#include "policies/evicting_keys.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/simd_ops.h"
#include "model/model.h"
#include "runtime/kv_cache.h"

namespace ts {

PolicyOptionList EvictingKeys::options() {
  return KeyBudget::options() +
         PolicyOptionList{
             integer_option("shared", 0, 1, "0", "1: one active set per KV head's group of query heads")};
}

EvictingKeys::EvictingKeys(PolicyOptions& options)
    : Policy(options.spec()), budget_(options, -1), shared_(*options.integer("shared") == 1) {}

void EvictingKeys::bind(const Model& model) {
  budget_.bind(model, name());
  group_ = model.config().n_heads / model.config().n_kv_heads;
  heads_per_state_ = shared_ ? group_ : 1;
  n_states_ = model.config().n_heads / heads_per_state_;
  heads_.assign(size_t{model.config().n_layers} * n_states_, {});
  n_seen_ = evict_checked_ = 0;
}

void EvictingKeys::truncate(size_t n_past) {
  TS_CHECK(n_past == 0 || n_past >= n_seen_, "policy ", name(), ": eviction state cannot be rewound to ",
           n_past, " of ", n_seen_, " positions");
  if (n_past == 0) {
    for (HeadState& s : heads_) s = {};
    n_seen_ = evict_checked_ = 0;
  }
}

void EvictingKeys::prepare_keys(const QueryRows& q) {
  const size_t n_rows = q.rows->size();
  collect_observed_ = n_rows == 1 && collects_observed_attention();
  if (n_rows == 0) return;
  // Lists from the rows' first position on: a batch that comes in chunks of rows reuses them.
  const size_t first_row = (*q.rows)[0], span = (*q.rows)[n_rows - 1] + 1 - first_row;
  lists_pos0_ = q.pos0 + first_row;
  row_lists_.resize(std::max(row_lists_.size(), span * n_states_));
  // The states are independent: each thread steps its own through the batch's rows in order.
  const auto step_states = [&](size_t b, size_t e, int) {
    for (size_t st = b; st < e; ++st) {
      HeadState& s = heads_[q.layer * n_states_ + st];
      for (size_t i = 0; i < n_rows; ++i)
        step(s, q, i, st, row_lists_[((*q.rows)[i] - first_row) * n_states_ + st], !collect_observed_);
    }
  };
  parallel_for(q.pool, n_states_, step_states);
  n_seen_ = std::max(n_seen_, q.pos0 + (*q.rows)[n_rows - 1] + 1);
}

void EvictingKeys::step(HeadState& s, const QueryRows& q, size_t row, size_t state,
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
  q.cache->keep_held(q.layer, keys);  // on a layer that dropped positions (composed with Token Filtering)
  if (!collect_now) return;
  // This step's attention over the active set, its query heads' probabilities summed.
  const size_t h0 = state * heads_per_state_;
  thread_local std::vector<float> probs;  // steps of other states run on other threads
  attention_probs(q, row, h0, heads_per_state_, h0 / group_, keys, probs);
  collect(s, keys, probs);
}

void EvictingKeys::attention_probs(const QueryRows& q, size_t row, size_t h0, size_t n_q, size_t kvh,
                                   std::span<const uint32_t> keys, std::vector<float>& probs) {
  const size_t hd = q.head_dim, n = keys.size();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  probs.assign(n, 0.0f);
  thread_local std::vector<float> p, m, l;
  p.resize(n_q * n);
  m.resize(n_q);
  l.resize(n_q);
  if (!q.cache->quantized()) {  // the attention's gather kernel, scores only, the group's queries in one pass
    thread_local std::vector<uint32_t> slot_buffer;
    const std::span<const uint32_t> slots = q.cache->slots(q.layer, keys, slot_buffer);
    ops().attn_gather(q.query(row, h0).data(), n_q, q.cache->key_head(q.layer, kvh), nullptr, hd,
                      slots.data(), nullptr, n, hd, scale, m.data(), l.data(), nullptr, p.data());
  } else {  // each key as the coded cache decodes it
    for (size_t g = 0; g < n_q; ++g) {
      float* pg = &p[g * n];
      m[g] = -INFINITY;
      for (size_t j = 0; j < n; ++j)
        m[g] = std::max(m[g],
                        pg[j] = q.cache->key_dot(q.layer, keys[j], kvh, q.query(row, h0 + g).data()) * scale);
      l[g] = 0.0f;
      for (size_t j = 0; j < n; ++j) l[g] += (pg[j] = std::exp(pg[j] - m[g]));
    }
  }
  for (size_t g = 0; g < n_q; ++g)  // head by head in order, as state_probs sums the attention's
    for (size_t j = 0; j < n; ++j) probs[j] += p[g * n + j] / l[g];
}

std::span<const float> EvictingKeys::state_probs(const AttentionRows& a, size_t state) {
  const size_t h0 = state * heads_per_state_;
  if (heads_per_state_ == 1) return a.probs_of(0, h0);
  probs_.assign(a.probs_of(0, h0).size(), 0.0f);
  for (size_t h = h0; h < h0 + heads_per_state_; ++h) {
    const std::span<const float> p = a.probs_of(0, h);
    for (size_t j = 0; j < p.size(); ++j) probs_[j] += p[j];
  }
  return probs_;
}

void EvictingKeys::observe_attention(const AttentionRows& a) {
  if (!collect_observed_) return;
  collect_observed_ = false;
  for (size_t st = 0; st < n_states_; ++st)
    collect(heads_[a.layer * n_states_ + st], a.keys_of(0, st * heads_per_state_), state_probs(a, st));
}

void EvictingKeys::select_keys(const KeyQuery& q, std::span<const uint32_t>,
                               std::vector<uint32_t>& keys) const {
  // step kept only positions the layer held then, and evictions come after the batch: the list
  // is a subset of the candidates (up to a sliding window, which the attention applies).
  const size_t state = shared_ ? q.kv_head : q.head;
  const std::vector<uint32_t>& chosen = row_lists_[(q.pos - lists_pos0_) * n_states_ + state];
  keys.assign(chosen.begin(), chosen.end());
}

void EvictingKeys::evict(const KvCache& cache, Evictions& out) {
  // The walk over every state's active set costs about what a few steps' selections do.
  if (n_seen_ == 0 || n_seen_ < evict_checked_ + std::max<size_t>(64, n_seen_ / 8)) return;
  evict_checked_ = n_seen_;
  for (const uint32_t layer : budget_.layers()) {
    active_somewhere_.assign(n_seen_, 0);
    for (size_t st = 0; st < n_states_; ++st)
      for (const uint32_t j : heads_[layer * n_states_ + st].active) active_somewhere_[j] = 1;
    // Positions the states have not stepped over yet (a batch's rows that did not attend) stay.
    const std::span<const uint32_t> held = cache.held(layer, cache.size() - 1);
    std::vector<uint32_t> gone;
    for (const uint32_t j : held)
      if (j < n_seen_ && !active_somewhere_[j]) gone.push_back(j);
    if (worth_evicting(gone.size(), held.size())) out.add(layer, std::move(gone));
  }
}

}  // namespace ts
