#include "policies/tokenbutler/tokenbutler.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/model.h"
#include "policies/tokenbutler/butler_file.h"

namespace ts {

PolicyOptionList TokenButlerKeys::options() {
  return KeyBudget::options() +
         PolicyOptionList{path_option("predictor", "the trained predictor (tokensieve train-butler)"),
                          integer_option("recent", 0, 1u << 24, "0", "recent positions always kept"),
                          integer_option("shared", 0, 1, "0", "1: one selection per KV head's group"),
                          choice_option("keys", {"f16", "i8"}, "the predictor's importance keys' precision")};
}

TokenButlerKeys::TokenButlerKeys(PolicyOptions& options)
    : Policy(options.spec()),
      budget_(options, -1),
      path_(options.path("predictor").value_or("")),
      recent_(*options.integer("recent")),
      shared_(*options.integer("shared") == 1),
      int8_keys_(options.choice<bool>("keys", {false, true})) {
  TS_CHECK(!path_.empty(), "policy ", name(), ": give predictor=FILE (a trained TokenButler predictor)");
}

void TokenButlerKeys::bind(const Model& model) {
  budget_.bind(model, name());
  weights_ = load_butler(path_).weights;
  const ButlerConfig& c = weights_.config;
  const ModelConfig& m = model.config();
  TS_CHECK(c.n_embd == m.n_embd && c.n_layers == m.n_layers && c.n_query_heads == m.n_heads, "policy ",
           name(), ": predictor ", path_, " is for a model with E=", c.n_embd, ", ", c.n_layers, " layers, ",
           c.n_query_heads, " heads, not this one");
  TS_CHECK(budget_.layers().empty() || budget_.layers().front() >= c.first_layer, "policy ", name(),
           ": the predictor covers layers from ", c.first_layer);
  n_kv_heads_ = m.n_kv_heads;
  group_ = m.n_heads / m.n_kv_heads;
  TS_CHECK(!int8_keys_ || (c.imp_dim % 2 == 0 && group_ * c.imp_dim <= kI8PairsMaxWidth), "policy ", name(),
           ": keys=i8 needs an even importance dimension of at most ", kI8PairsMaxWidth / group_, ", not ",
           c.imp_dim);
  net_ = std::make_unique<ButlerNet>(weights_, ops());
  keys_.assign(c.n_slots() / group_, {});
  truncate(0);
}

void TokenButlerKeys::truncate(size_t n_past) {
  const ButlerConfig& c = weights_.config;
  n_past = std::min(n_past, cache_.size(c));
  cache_.truncate(n_past, c);
  const size_t blocks = (n_past + kF16Block - 1) / kF16Block, block_stride = group_ * c.imp_dim * kF16Block;
  for (ImportanceKeys& k : keys_) {
    k.halves.resize(std::min(k.halves.size(), blocks * block_stride));
    k.codes.resize(std::min(k.codes.size(), blocks * block_stride));
    k.scales.resize(std::min(k.scales.size(), blocks * kF16Block));
  }
}

void TokenButlerKeys::observe_layer_input(const LayerInput& in) {
  const ButlerConfig& c = weights_.config;
  truncate(in.pos0);  // a sequence restarted or rewound without truncate
  TS_CHECK(cache_.size(c) == in.pos0, "policy ", name(), ": positions before ", in.pos0, " were not seen");
  net_->forward(in.normed, in.n_tok, cache_, acts_, /*for_backward=*/false);
  batch_pos0_ = in.pos0;
  const size_t gd = group_ * c.imp_dim, o = c.n_out(), block_stride = gd * kF16Block;
  const size_t end = in.pos0 + in.n_tok, blocks = (end + kF16Block - 1) / kF16Block;
  thread_local std::vector<uint16_t> row;
  row.resize(gd);
  for (size_t s = 0; s < keys_.size(); ++s) {  // a group's slots are adjacent in k_imp's rows
    ImportanceKeys& k = keys_[s];
    if (int8_keys_) {
      k.codes.resize(blocks * block_stride);
      k.scales.resize(blocks * kF16Block);
    } else {
      k.halves.resize(blocks * block_stride);
    }
    for (size_t pos = in.pos0; pos < end; ++pos) {  // one column of its block
      const float* key = &acts_.k_imp[(pos - in.pos0) * o + s * gd];
      const size_t block = pos / kF16Block * block_stride, r = pos % kF16Block;
      if (int8_keys_) {  // symmetric, one scale per position: max |key| / 127
        float amax = 0.0f;
        for (size_t x = 0; x < gd; ++x) amax = std::max(amax, std::fabs(key[x]));
        const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        for (size_t x = 0; x < gd; ++x)
          k.codes[block + x / 2 * 2 * kF16Block + r * 2 + x % 2] =
              static_cast<int8_t>(std::nearbyint(key[x] * inv));
        k.scales[pos] = amax / 127.0f;
      } else {
        ops().f32_to_f16(key, row.data(), gd);
        for (size_t x = 0; x < gd; ++x) k.halves[block + x * kF16Block + r] = row[x];
      }
    }
  }
}

void TokenButlerKeys::select_keys(const KeyQuery& q, std::span<const uint32_t> candidates,
                                  std::vector<uint32_t>& keys) const {
  const ButlerConfig& c = weights_.config;
  // q.n_heads adjacent query heads (one, or the group): their importance queries and keys are
  // adjacent, so the sum of their scores is one dot product of width n_heads * d.
  const size_t d = c.imp_dim, block_stride = group_ * d * kF16Block, width = q.n_heads * d;
  const float* qv = &acts_.q_imp[(q.pos - batch_pos0_) * c.n_out() + c.slot(q.layer, q.head) * d];
  const ImportanceKeys& k = keys_[(q.layer - c.first_layer) * n_kv_heads_ + q.kv_head];
  const size_t first = (q.head % group_) * d * kF16Block;  // the query head's first dimension
  // Every position is scored (candidates are a subset of them, all of them unless the cache has holes).
  thread_local std::vector<float> scores;
  scores.resize(q.pos + 1);
  if (int8_keys_) {
    thread_local std::vector<int16_t> q16;
    q16.resize(width);
    const float q_scale = round_query_i16(qv, width, q16.data());
    ops().dot_i8_pairs(k.codes.data() + first, block_stride, k.scales.data(), q.pos + 1, q16.data(), q_scale,
                       width, scores.data());
  } else {
    ops().dot_f16_blocks(k.halves.data() + first, block_stride, q.pos + 1, qv, width, scores.data());
  }
  if (candidates.size() != q.pos + 1)
    for (size_t j = 0; j < candidates.size(); ++j) scores[j] = scores[candidates[j]];  // candidates[j] >= j
  scores.resize(candidates.size());
  select_top_keys(candidates, scores, budget_.budget(q.pos), budget_.sinks(), keys);
  if (recent_ == 0) return;
  thread_local std::vector<uint32_t> merged;
  merged.clear();
  const auto recent = std::ranges::find_if(candidates, [&](uint32_t j) { return j + recent_ > q.pos; });
  std::set_union(keys.begin(), keys.end(), recent, candidates.end(), std::back_inserter(merged));
  keys.swap(merged);
}

}  // namespace ts
