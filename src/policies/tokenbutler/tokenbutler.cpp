#include "policies/tokenbutler/tokenbutler.h"

#include <algorithm>

#include "core/error.h"
#include "model/model.h"
#include "policies/tokenbutler/butler_file.h"

namespace ts {

TokenButlerKeys::TokenButlerKeys(PolicyOptions& options)
    : Policy(options.spec()),
      budget_(options, -1),
      path_(options.take_path("predictor").value_or("")),
      recent_(options.take_uint("recent", 0, 1u << 24).value_or(0)) {
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
  net_ = std::make_unique<ButlerNet>(weights_, ops());
  keys_.assign(c.n_slots(), {});
  truncate(0);
}

void TokenButlerKeys::truncate(size_t n_past) {
  const ButlerConfig& c = weights_.config;
  n_past = std::min(n_past, cache_.size(c));
  cache_.truncate(n_past, c);
  for (std::vector<float>& k : keys_) k.resize(std::min(k.size(), n_past * c.imp_dim));
}

void TokenButlerKeys::observe_layer_input(const LayerInput& in) {
  const ButlerConfig& c = weights_.config;
  truncate(in.pos0);  // a sequence restarted or rewound without truncate
  TS_CHECK(cache_.size(c) == in.pos0, "policy ", name(), ": positions before ", in.pos0, " were not seen");
  net_->forward(in.normed, in.n_tok, cache_, acts_, /*for_backward=*/false);
  batch_pos0_ = in.pos0;
  const size_t d = c.imp_dim, o = c.n_out();
  for (size_t s = 0; s < keys_.size(); ++s) {
    std::vector<float>& k = keys_[s];
    k.resize((in.pos0 + in.n_tok) * d);
    for (size_t t = 0; t < in.n_tok; ++t) std::copy_n(&acts_.k_imp[t * o + s * d], d, &k[(in.pos0 + t) * d]);
  }
}

void TokenButlerKeys::select_keys(const KeyQuery& q, std::span<const uint32_t> candidates,
                                  std::vector<uint32_t>& keys) const {
  const ButlerConfig& c = weights_.config;
  const size_t d = c.imp_dim, slot = c.slot(q.layer, q.head);
  const float* qv = &acts_.q_imp[(q.pos - batch_pos0_) * c.n_out() + slot * d];
  const float* kv = keys_[slot].data();
  thread_local std::vector<float> scores;
  scores.resize(candidates.size());
  if (candidates.size() == q.pos + 1) {  // every position: one matrix-vector product
    ops().gemm_f32(kv, candidates.size(), qv, d, 1, d, scores.data(), 0);
  } else {
    for (size_t j = 0; j < candidates.size(); ++j) scores[j] = ops().dot_f32(qv, kv + candidates[j] * d, d);
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
