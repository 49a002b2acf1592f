#include "policies/tokenbutler/tokenbutler.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/thread_pool.h"
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
  n_scored_ = 0;
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

void TokenButlerKeys::score(size_t layer, size_t pos, size_t head, size_t n_heads, size_t begin, size_t end,
                            float* out) const {
  const ButlerConfig& c = weights_.config;
  // n_heads adjacent query heads (one, or the group): their importance queries and keys are
  // adjacent, so the sum of their scores is one dot product of width n_heads * d.
  const size_t d = c.imp_dim, block_stride = group_ * d * kF16Block, width = n_heads * d;
  const float* qv = &acts_.q_imp[(pos - batch_pos0_) * c.n_out() + c.slot(layer, head) * d];
  const ImportanceKeys& k = keys_[(layer - c.first_layer) * n_kv_heads_ + head / group_];
  // The query head's first dimension in the first block scored.
  const size_t first = (head % group_) * d * kF16Block + begin / kF16Block * block_stride;
  if (int8_keys_) {
    thread_local std::vector<int16_t> q16;
    q16.resize(width);
    const float q_scale = round_query_i16(qv, width, q16.data());
    ops().dot_i8_pairs(k.codes.data() + first, block_stride, k.scales.data() + begin, end - begin, q16.data(),
                       q_scale, width, out);
  } else {
    ops().dot_f16_blocks(k.halves.data() + first, block_stride, end - begin, qv, width, out);
  }
}

void TokenButlerKeys::prepare_keys(const QueryRows& q) {
  const size_t per_list = shared_ ? group_ : 1, per_row = q.n_heads / per_list;
  const size_t n_lists = q.rows->size() * per_row;
  n_scored_ = 0;
  // Many lists (a prefill batch) already spread over the threads one list each.
  if (n_lists == 0 || !q.pool || q.pool->size() < 2 || n_lists > 8 * static_cast<size_t>(q.pool->size()))
    return;
  if (scored_.size() < n_lists) scored_.resize(n_lists);
  std::vector<size_t>& chunk_end = scored_chunk_end_;  // items before each list's end (a member:
  chunk_end.clear();                                   // the workers would see their own thread_local)
  // Positions a work item scores: about 8 items a thread, whole blocks, at least 4 of them.
  const size_t positions = n_lists * (q.pos0 + (*q.rows)[q.rows->size() - 1] + 1);
  const size_t chunk =
      std::max(4 * kF16Block, (positions / (8 * static_cast<size_t>(q.pool->size())) + kF16Block - 1) /
                                  kF16Block * kF16Block);
  for (size_t l = 0; l < n_lists; ++l) {
    ScoredList& list = scored_[l];
    list.layer = q.layer;
    list.pos = q.pos0 + (*q.rows)[l / per_row];
    list.head = l % per_row * per_list;
    list.scores.resize(list.pos + 1);
    chunk_end.push_back((chunk_end.empty() ? 0 : chunk_end.back()) + (list.pos + chunk) / chunk);
  }
  q.pool->parallel_for(chunk_end.back(), [&](size_t b, size_t e, int) {
    for (size_t item = b; item < e; ++item) {
      const size_t l = static_cast<size_t>(std::ranges::upper_bound(chunk_end, item) - chunk_end.begin());
      ScoredList& list = scored_[l];
      const size_t begin = (item - (l > 0 ? chunk_end[l - 1] : 0)) * chunk;
      const size_t end = std::min(begin + chunk, list.pos + 1);
      score(q.layer, list.pos, list.head, per_list, begin, end, list.scores.data() + begin);
    }
  });
  n_scored_ = n_lists;
}

void TokenButlerKeys::select_keys(const KeyQuery& q, std::span<const uint32_t> candidates,
                                  std::vector<uint32_t>& keys) const {
  // Every position is scored (candidates are a subset of them, all of them unless the cache has holes).
  const auto scored = std::find_if(
      scored_.begin(), scored_.begin() + static_cast<ptrdiff_t>(n_scored_),
      [&](const ScoredList& l) { return l.layer == q.layer && l.pos == q.pos && l.head == q.head; });
  thread_local std::vector<float> own;
  std::span<const float> scores;
  if (scored != scored_.begin() + static_cast<ptrdiff_t>(n_scored_)) {
    scores = scored->scores;
  } else {
    own.resize(q.pos + 1);
    score(q.layer, q.pos, q.head, q.n_heads, 0, q.pos + 1, own.data());
    scores = own;
  }
  if (candidates.size() != q.pos + 1) {
    // own may be scores (candidates[j] >= j, so in place is safe); grown, never shrunk first.
    if (own.size() < candidates.size()) own.resize(candidates.size());
    float* remapped = own.data();
    for (size_t j = 0; j < candidates.size(); ++j) remapped[j] = scores[candidates[j]];
    scores = std::span<const float>(own).first(candidates.size());
  }
  select_top_keys(candidates, scores, budget_.budget(q.pos), budget_.sinks(), keys);
  if (recent_ == 0) return;
  thread_local std::vector<uint32_t> merged;
  merged.clear();
  const auto recent = std::ranges::find_if(candidates, [&](uint32_t j) { return j + recent_ > q.pos; });
  std::set_union(keys.begin(), keys.end(), recent, candidates.end(), std::back_inserter(merged));
  keys.swap(merged);
}

}  // namespace ts
