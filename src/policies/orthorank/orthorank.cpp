#include "policies/orthorank/orthorank.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "kernels/simd_ops.h"
#include "model/model.h"
#include "policies/position_hash.h"

namespace ts {

PolicyOptionList OrthoRank::options() {
  return LayerChoice::options() +
         PolicyOptionList{
             number_option("ratio", 0, 1, "",
                           "fraction of tokens that run each chosen layer (default: the "
                           "profile's, else 0.333)"),
             choice_option("select", {"ortho", "reverse", "random"}, "which tokens run the layer"),
             integer_option("seed", 0, UINT64_MAX, "0", "select=random's seed"),
             choice_option("stage", {"normed", "residual"}, "the hidden state scored"),
             choice_option("kv", {"all", "selected"}, "whose K/V the chosen layers cache")};
}

OrthoRank::OrthoRank(PolicyOptions& options)
    : Policy(options.spec()), ratio_option_(options.number("ratio")), layers_(options) {
  select_ = options.choice<Select>("select", {Select::Ortho, Select::Reverse, Select::Random});
  seed_ = *options.integer("seed");
  score_residual_ = options.choice<bool>("stage", {false, true});
  kv_for_unselected_ = options.choice<bool>("kv", {true, false});
}

void OrthoRank::bind(const Model& model) {
  layers_.bind(model, name());
  ratio_ = ratio_option_ ? *ratio_option_ : layers_.profile() ? *layers_.profile()->ratio : 0.333;
  state_.assign(model.config().n_layers, {});
}

void OrthoRank::truncate(size_t n_past) {
  for (LayerState& s : state_) {
    s.rank.truncate(n_past);
    if (n_past == 0) s.sink.clear();
  }
}

float OrthoRank::score(const LayerInput& in, size_t t, std::span<const float> sink) const {
  const size_t pos = in.pos0 + t;
  if (pos == 0) return std::numeric_limits<float>::infinity();
  if (select_ == Select::Random) return uniform_at(seed_, in.layer, pos);
  const std::span<const float> h = score_residual_ ? in.residual_row(t) : in.normed_row(t);
  const float s = std::fabs(ops().dot_f32(sink.data(), h.data(), in.dim));
  if (std::isnan(s)) return std::numeric_limits<float>::infinity();  // a NaN state is never chosen
  return select_ == Select::Reverse ? -s : s;
}

void OrthoRank::select_tokens(const LayerInput& in, TokenSelection& out) {
  LayerState& s = state_[in.layer];
  if (in.pos0 == 0) {
    const std::span<const float> h0 = score_residual_ ? in.residual_row(0) : in.normed_row(0);
    s.sink.assign(h0.begin(), h0.end());
  }
  out.scores.resize(in.n_tok);
  for (size_t t = 0; t < in.n_tok; ++t) out.scores[t] = score(in, t, s.sink);
  s.rank.add(in.pos0, out.scores);
  // k = int(ratio * N) over the N tokens so far, the sink included (Algorithm 1).
  const auto keep = static_cast<size_t>(ratio_ * static_cast<double>(s.rank.size()));
  out.rows.clear();
  for (size_t t = 0; t < in.n_tok; ++t)
    if (s.rank.ranks_within(out.scores[t], in.pos0 + t, keep)) out.rows.push_back(static_cast<uint32_t>(t));
  out.kv_for_unselected = kv_for_unselected_;
}

}  // namespace ts
