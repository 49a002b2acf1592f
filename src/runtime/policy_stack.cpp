#include "runtime/policy_stack.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "model/model.h"
#include "runtime/kv_cache.h"

namespace ts {

const char* hook_name(Hook h) {
  switch (h) {
    case Hook::SelectTokens:
      return "select_tokens";
    case Hook::SkipAttention:
      return "skip_attention";
    case Hook::KvStorage:
      return "choose_kv_storage";
    case Hook::SelectKeys:
      return "select_keys";
    case Hook::Evict:
      return "evict";
    case Hook::ObserveLayerInput:
      return "observe_layer_input";
    case Hook::ObserveKv:
      return "observe_kv";
    case Hook::ObserveQueries:
      return "observe_queries";
    case Hook::ObserveAttention:
      return "observe_attention";
  }
  return "?";
}

PolicyStack::PolicyStack(std::vector<std::unique_ptr<Policy>> policies, const Model& model)
    : policies_(std::move(policies)),
      n_layers_(model.config().n_layers),
      n_heads_(model.config().n_heads),
      owners_(kHookCount * n_layers_, nullptr),
      observers_(kHookCount * n_layers_),
      record_index_(n_layers_, -1) {
  for (const auto& p : policies_) {
    p->bind(model);
    for (const HookClaim& c : p->claims()) {
      if (c.layers.empty()) {
        for (size_t l = 0; l < n_layers_; ++l) claim(p.get(), c.hook, l);
      }
      for (uint32_t l : c.layers) {
        TS_CHECK(l < n_layers_, "policy ", p->name(), ": layer ", l, " does not exist (the model has ",
                 n_layers_, " layers, 0..", n_layers_ - 1, ")");
        claim(p.get(), c.hook, l);
      }
      if (c.hook == Hook::Evict && std::find(evictors_.begin(), evictors_.end(), p.get()) == evictors_.end())
        evictors_.push_back(p.get());
    }
    ranks_whole_calls_ = ranks_whole_calls_ || p->ranks_whole_calls();
    reads_normed_input_ = reads_normed_input_ || p->reads_normed_input();
    if (const std::optional<KvFormat> f = p->kv_format()) {
      TS_CHECK(!kv_format_, "policy ", p->describe(), ": another policy already sets the KV cache format");
      kv_format_ = f;
    }
  }
}

void PolicyStack::claim(Policy* p, Hook h, size_t layer) {
  if (!is_decision(h)) {
    std::vector<Policy*>& obs = observers_[slot(h, layer)];
    if (std::find(obs.begin(), obs.end(), p) == obs.end()) obs.push_back(p);
    return;
  }
  Policy*& owner = owners_[slot(h, layer)];
  TS_CHECK(owner == nullptr || owner == p, "policies ", owner ? owner->describe() : "", " and ",
           p->describe(), " both decide ", hook_name(h), " at layer ", layer, "; give them disjoint layers");
  owner = p;
}

void PolicyStack::set_log(DecisionLog* log) {
  log_ = log;
  if (!log_) return;
  log_->policies.clear();
  for (const auto& p : policies_) log_->policies.push_back(p->describe());
  log_->n_layers = static_cast<uint32_t>(n_layers_);
  log_->n_heads = static_cast<uint32_t>(n_heads_);
}

void PolicyStack::begin_batch(size_t pos0, size_t n_tok) {
  pos0_ = pos0;
  n_tok_ = n_tok;
  const uint64_t pairs = uint64_t{n_tok} * n_layers_;
  counts_.token_layers += pairs;
  counts_.attention += pairs;
  counts_.ffn += pairs;
  counts_.kv_cached += pairs;
  std::fill(record_index_.begin(), record_index_.end(), -1);
  if (log_) log_->batches.push_back({static_cast<uint32_t>(pos0), static_cast<uint32_t>(n_tok)});
}

LayerRecord* PolicyStack::record(size_t layer) {
  if (!log_) return nullptr;
  if (record_index_[layer] < 0) {
    record_index_[layer] = static_cast<int64_t>(log_->layers.size());
    log_->layers.push_back({static_cast<uint32_t>(log_->batches.size() - 1),
                            static_cast<uint32_t>(layer),
                            std::vector<uint8_t>(n_tok_, kDenseToken),
                            {},
                            {},
                            {}});
  }
  return &log_->layers[static_cast<size_t>(record_index_[layer])];
}

void PolicyStack::plan_layer(const LayerInput& in, LayerRows& rows) {
  for (Policy* p : observers(Hook::ObserveLayerInput, in.layer)) p->observe_layer_input(in);
  rows.set_all(in.n_tok);
  Policy* p = owner(Hook::SelectTokens, in.layer);
  if (!p) return;
  selection_.rows.resize(in.n_tok);
  std::iota(selection_.rows.begin(), selection_.rows.end(), 0u);
  selection_.kv_for_unselected = true;
  selection_.scores.clear();
  p->select_tokens(in, selection_);
  const std::vector<uint32_t>& sel = selection_.rows;
  for (size_t i = 0; i < sel.size(); ++i)
    TS_CHECK(sel[i] < in.n_tok && (i == 0 || sel[i - 1] < sel[i]), "policy ", p->name(),
             ": selected rows must be ascending batch rows");
  TS_CHECK(selection_.scores.empty() || selection_.scores.size() == in.n_tok, "policy ", p->name(),
           ": one score per token");
  rows.ffn.set_list(sel);
  rows.attn.set_list(sel);
  if (!selection_.kv_for_unselected) rows.kv.set_list(sel);
  const uint64_t unselected = in.n_tok - sel.size();
  counts_.attention -= unselected;
  counts_.ffn -= unselected;
  if (!selection_.kv_for_unselected) counts_.kv_cached -= unselected;

  if (LayerRecord* r = record(in.layer)) {
    const uint8_t unselected = selection_.kv_for_unselected ? kKvCached : 0;
    std::fill(r->flags.begin(), r->flags.end(), unselected);
    for (uint32_t t : sel) r->flags[t] = kDenseToken;
    r->scores = selection_.scores;
  }
}

void PolicyStack::decide_kv(const LayerInput& in, const KvRows& kv, LayerRows& rows,
                            std::vector<KvStorage>& storage) {
  storage.assign(rows.kv.size(), KvStorage::Default);
  if (Policy* p = owner(Hook::SkipAttention, in.layer)) {
    skips_.skip.assign(rows.ffn.size(), 0);
    skips_.cache_skipped_kv = true;
    p->skip_attention(in, kv, rows.ffn, skips_);
    TS_CHECK(skips_.skip.size() == rows.ffn.size(), "policy ", p->name(), ": one skip flag per running row");
    kept_rows_.clear();
    LayerRecord* r = record(in.layer);
    for (size_t i = 0; i < rows.ffn.size(); ++i) {
      const uint32_t t = rows.ffn[i];
      if (!skips_.skip[i]) {
        kept_rows_.push_back(t);
        continue;
      }
      if (!skips_.cache_skipped_kv) storage[rows.kv.index_of(t)] = KvStorage::Dropped;
      if (r)
        r->flags[t] &= static_cast<uint8_t>(~(kRanAttention | (skips_.cache_skipped_kv ? 0 : kKvCached)));
    }
    counts_.attention -= rows.attn.size() - kept_rows_.size();
    rows.attn.set_list(kept_rows_);
  }
  if (Policy* p = owner(Hook::KvStorage, in.layer)) {
    p->choose_kv_storage(in, kv, storage);
    TS_CHECK((kv_format_ && kv_format_->low_bits) ||
                 std::find(storage.begin(), storage.end(), KvStorage::Low) == storage.end(),
             "policy ", p->name(), ": low-precision K/V need a mixed-precision cache format");
    if (LayerRecord* r = record(in.layer)) {
      for (size_t i = 0; i < rows.kv.size(); ++i) {
        uint8_t& f = r->flags[rows.kv[i]];
        if (storage[i] == KvStorage::Full) f |= kKvFullPrecision;
        if (storage[i] == KvStorage::Low) f |= kKvLowPrecision;
        if (storage[i] == KvStorage::Dropped) f &= static_cast<uint8_t>(~kKvCached);
      }
    }
  }
  counts_.kv_cached -= static_cast<uint64_t>(std::count(storage.begin(), storage.end(), KvStorage::Dropped));
  for (Policy* o : observers(Hook::ObserveKv, in.layer)) o->observe_kv(kv);
}

void PolicyStack::after_attention(const AttentionRows& a) {
  if (key_selector(a.layer)) {
    if (LayerRecord* r = record(a.layer)) {
      // A batch's rows may come in chunks (see ForwardPass::attend_listed): one record for them all.
      if (r->keys_attended.empty()) r->keys_attended.assign(n_tok_ * n_heads_, 0);
      for (size_t i = 0; i < a.rows->size(); ++i)
        for (size_t h = 0; h < n_heads_; ++h)
          r->keys_attended[(*a.rows)[i] * n_heads_ + h] = static_cast<uint32_t>(a.keys_of(i, h).size());
      if (log_->key_lists) {
        if (r->key_lists.empty()) r->key_lists.assign(n_tok_ * n_heads_, {});
        for (size_t i = 0; i < a.rows->size(); ++i)
          for (size_t h = 0; h < n_heads_; ++h) {
            const std::span<const uint32_t> keys = a.keys_of(i, h);
            r->key_lists[(*a.rows)[i] * n_heads_ + h].assign(keys.begin(), keys.end());
          }
      }
    }
  }
  for (Policy* o : observers(Hook::ObserveAttention, a.layer)) o->observe_attention(a);
}

void PolicyStack::end_batch(KvCache& cache) {
  for (Policy* p : evictors_) {
    Evictions ev;
    p->evict(cache, ev);
    for (auto& [layer, positions] : ev.by_layer) {
      TS_CHECK(layer < n_layers_ && owner(Hook::Evict, layer) == p, "policy ", p->name(),
               ": evicts at layer ", layer, ", which it did not claim");
      cache.evict(layer, positions);
      if (log_)
        log_->evictions.push_back(
            {static_cast<uint32_t>(log_->batches.size() - 1), layer, std::move(positions)});
    }
  }
}

size_t PolicyStack::rewind_point(size_t n) const {
  // Each answer is at most its question, so asking again until all agree ends.
  for (size_t agreed = 0; agreed < policies_.size();) {
    agreed = 0;
    for (const auto& p : policies_) {
      const size_t m = p->rewind_point(n);
      agreed += m == n;
      n = m;
    }
  }
  return n;
}

void PolicyStack::truncate(size_t n_past) {
  for (const auto& p : policies_) p->truncate(n_past);
}

}  // namespace ts
