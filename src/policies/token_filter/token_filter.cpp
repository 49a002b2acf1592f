#include "policies/token_filter/token_filter.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "model/model.h"
#include "policies/position_hash.h"

namespace ts {

PolicyOptionList TokenFilter::options() {
  return {
      number_option("ratio", 0, 1, "0.5", "target fraction of tokens skipping attention in filtered layers"),
      number_option("tail", 0, 1, "", "the filtered fraction of layers (default 0.5; not with uniform)"),
      choice_option("placement", {"tail", "head", "uniform"}, "which layers filter"),
      choice_option("select", {"kv", "k", "v", "random"}, "what the redundancy score compares"),
      choice_option("fusion", {"printed", "intent", "mean"}, "how K and V similarities combine"),
      choice_option("anchor", {"ema", "mean"}, "the running anchor"),
      number_option("decay", 0, 1, "0.9", "the anchor's EMA decay"),
      choice_option("anchor_update", {"after", "before"}, "anchor updated after or before scoring"),
      choice_option("variance", {"instant", "running"}, "the score's normalising variance"),
      choice_option("update", {"eq4", "alg1"}, "the threshold update's sign (Eq. 4 or Algorithm 1)"),
      choice_option("control", {"layer", "global"}, "one threshold per layer or one for all"),
      number_option("lr", 0, 10, "0.01", "the threshold controller's learning rate"),
      number_option("threshold", -2, 2, "0.5", "the initial threshold"),
      choice_option("state", {"sequence", "run"}, "anchors and thresholds reset per sequence or kept"),
      choice_option("decide", {"token", "call"}, "decide per token or once per call"),
      choice_option("kv", {"drop", "cache"}, "whether skipped tokens' K/V stay in the cache"),
      integer_option("seed", 0, UINT64_MAX, "0", "select=random's seed")};
}

TokenFilter::TokenFilter(PolicyOptions& o) : Policy(o.spec()) {
  const auto given = [&](std::string_view key) {
    return std::any_of(o.spec().options.begin(), o.spec().options.end(),
                       [&](const auto& kv) { return kv.first == key; });
  };
  ratio_ = *o.number("ratio");
  tail_ = o.number("tail");
  TS_CHECK(!tail_ || *tail_ > 0, "policy tokenfilter: tail=0 filters no layer (give a fraction in (0, 1])");
  placement_ = o.choice<Placement>("placement", {Placement::Tail, Placement::Head, Placement::Uniform});
  TS_CHECK(!(placement_ == Placement::Uniform && tail_), "policy tokenfilter: placement=uniform filters ",
           "every layer and takes no tail=");
  select_ = o.choice<Select>("select", {Select::Kv, Select::Key, Select::Value, Select::Random});
  TS_CHECK(select_ == Select::Kv || !given("fusion"),
           "policy tokenfilter: fusion= applies to select=kv only");
  fusion_ = o.choice<Fusion>("fusion", {Fusion::Printed, Fusion::Intent, Fusion::Mean});
  if (select_ == Select::Key) fusion_ = Fusion::KeyOnly;
  if (select_ == Select::Value) fusion_ = Fusion::ValueOnly;
  exact_mean_ = o.choice<bool>("anchor", {false, true});
  decay_ = *o.number("decay");
  anchor_before_ = o.choice<bool>("anchor_update", {false, true});
  running_variance_ = o.choice<bool>("variance", {false, true});
  controller_.printed_sign = o.choice<bool>("update", {false, true});
  global_control_ = o.choice<bool>("control", {false, true});
  controller_.lr = *o.number("lr");
  controller_.initial_threshold = *o.number("threshold");
  run_state_ = o.choice<bool>("state", {false, true});
  per_call_ = o.choice<bool>("decide", {false, true});
  cache_kv_ = o.choice<bool>("kv", {false, true});
  seed_ = *o.integer("seed");
}

void TokenFilter::bind(const Model& model) {
  const ModelConfig& c = model.config();
  layers_ = placed_layers(placement_, tail_.value_or(0.5), c.n_layers);
  const double target = ratio_ * static_cast<double>(c.n_layers) / static_cast<double>(layers_.size());
  TS_CHECK(target <= 1 + 1e-9, "policy tokenfilter: ratio=", ratio_, " is more than the ", layers_.size(),
           " filtered layers of ", c.n_layers, " can skip (raise tail= to at least ", ratio_, ")");
  controller_.target = std::min(target, 1.0);
  initial_ = {controller_.initial_threshold, {}};
  n_kv_heads_ = c.n_kv_heads;
  head_dim_ = c.head_dim;
  kv_dim_ = n_kv_heads_ * head_dim_;
  state_.assign(c.n_layers, {});
  for (LayerState& s : state_) s.live = initial_;
}

size_t TokenFilter::LayerState::steps_before(size_t pos) const {
  return static_cast<size_t>(
      std::lower_bound(steps.begin(), steps.end(), pos, [](const Step& s, size_t p) { return s.pos < p; }) -
      steps.begin());
}

size_t TokenFilter::LayerState::restorable(size_t n_steps) const {
  if (n_steps == 0 || n_steps - 1 >= recent_first) return n_steps;
  return n_steps / kCheckpoint * kCheckpoint;
}

size_t TokenFilter::rewind_point(size_t n) const {
  if (per_call_) return 0;
  if (select_ == Select::Random) return n;  // no anchors
  // A layer moving n back may leave another layer's steps at a point it cannot restore.
  for (size_t asked = SIZE_MAX; asked != n;) {
    asked = n;
    for (uint32_t l : layers_) {
      const LayerState& s = state_[l];
      const size_t keep = s.steps_before(n), exact = s.restorable(keep);
      if (exact < keep) n = s.steps[exact].pos;  // truncating there keeps `exact` steps
    }
  }
  return n;
}

void TokenFilter::truncate(size_t n_past) {
  if (select_ != Select::Random) {
    for (uint32_t l : layers_) {
      const size_t keep = state_[l].steps_before(n_past);
      TS_CHECK(state_[l].restorable(keep) == keep, "policy tokenfilter: cannot rewind to position ", n_past,
               " (rewind_point gives the nearest earlier one it can)");
    }
  }
  const size_t width = 2 * kv_dim_;
  for (uint32_t l : layers_) {
    LayerState& s = state_[l];
    const size_t keep = s.steps_before(n_past);
    s.steps.resize(keep);
    if (select_ == Select::Random) continue;
    if (keep == 0) {
      s.recent.clear();
      s.recent_first = 0;
    } else if (keep - 1 >= s.recent_first) {
      s.recent.resize((keep - s.recent_first) * width);
    } else {  // keep is a multiple of kCheckpoint
      const auto checkpoint =
          s.checkpoints.begin() + static_cast<std::ptrdiff_t>((keep / kCheckpoint - 1) * width);
      s.recent.assign(checkpoint, checkpoint + static_cast<std::ptrdiff_t>(width));
      s.recent_first = keep - 1;
    }
    s.checkpoints.resize(keep / kCheckpoint * width);
  }
}

void TokenFilter::update_anchor(float* anchor, const float* x, uint32_t n_before) const {
  const float w = exact_mean_ ? 1.0f / static_cast<float>(n_before + 1) : static_cast<float>(1 - decay_);
  for (size_t i = 0; i < kv_dim_; ++i) anchor[i] += w * (x[i] - anchor[i]);
}

std::optional<float> TokenFilter::advance(LayerState& s, size_t pos, const float* key, const float* value) {
  const bool first = s.steps.empty();
  Step step = first ? Step{} : s.steps.back();
  step.pos = static_cast<uint32_t>(pos);
  if (first) step.controller = initial_;
  if (select_ == Select::Random) {
    s.steps.push_back(step);
    if (first) return std::nullopt;
    return uniform_at(seed_, &s - state_.data(), pos);
  }
  const size_t width = 2 * kv_dim_;
  if (s.recent.size() == 2 * kCheckpoint * width) {  // the older half is past recent reach
    s.recent.erase(s.recent.begin(), s.recent.begin() + static_cast<std::ptrdiff_t>(kCheckpoint * width));
    s.recent_first += kCheckpoint;
  }
  s.recent.resize(s.recent.size() + width);
  float* anchor_k = latest_anchors(s);
  float* anchor_v = anchor_k + kv_dim_;
  const auto push = [&] {
    s.steps.push_back(step);
    if (s.steps.size() % kCheckpoint == 0)
      s.checkpoints.insert(s.checkpoints.end(), anchor_k, anchor_k + width);
  };
  if (first) {
    std::copy(key, key + kv_dim_, anchor_k);
    std::copy(value, value + kv_dim_, anchor_v);
    step.n_tokens = 1;
    push();
    return std::nullopt;
  }
  std::copy(anchor_k - width, anchor_k, anchor_k);  // the previous position's anchors
  const auto update = [&] {
    update_anchor(anchor_k, key, step.n_tokens);
    update_anchor(anchor_v, value, step.n_tokens);
  };
  if (anchor_before_) update();
  HeadSimilarity sk, sv;
  if (fusion_ != Fusion::ValueOnly)
    sk = head_similarity({key, kv_dim_}, {anchor_k, kv_dim_}, n_kv_heads_, head_dim_);
  if (fusion_ != Fusion::KeyOnly)
    sv = head_similarity({value, kv_dim_}, {anchor_v, kv_dim_}, n_kv_heads_, head_dim_);
  if (!anchor_before_) update();
  if (running_variance_) {
    const bool seeded = step.n_tokens > 1;  // an earlier token was scored
    const auto smooth = [&](float& run, float now) {
      run = seeded ? float(decay_ * run + (1 - decay_) * now) : now;
    };
    smooth(step.var_k, sk.var);
    smooth(step.var_v, sv.var);
    sk.var = step.var_k;
    sv.var = step.var_v;
  }
  ++step.n_tokens;
  push();
  return fused_score(fusion_, sk, sv);
}

SkipCount TokenFilter::observed(size_t layer) const {
  if (!global_control_) return controller_of(state_[layer]).count;
  SkipCount all;
  for (uint32_t l : layers_) all += controller_of(state_[l]).count;
  return all;
}

bool TokenFilter::decide(size_t layer, float score) {
  const SkipCount seen = observed(layer);
  Controller& c = controller_of(state_[layer]);
  // Random skipping: the score is a uniform number, skipped below the target.
  const bool skip = select_ == Select::Random ? score < controller_.target
                                              : controlled_skip(controller_, c.threshold, seen, score);
  c.count.add(skip);
  return skip;
}

void TokenFilter::skip_attention(const LayerInput& in, const KvRows& kv, const RowSet& running,
                                 AttentionSkips& out) {
  LayerState& s = state_[in.layer];
  out.cache_skipped_kv = cache_kv_;
  std::optional<float> last;
  size_t first_scored = running.size();
  for (size_t i = 0; i < running.size(); ++i) {
    const uint32_t t = running[i];
    const size_t r = kv.rows->index_of(t);
    const std::optional<float> score =
        advance(s, in.pos0 + t, kv.keys + r * kv_dim_, kv.values + r * kv_dim_);
    if (!score) continue;  // the sequence's first token seeds the anchors
    first_scored = std::min(first_scored, i);
    if (per_call_) {
      last = score;
    } else {
      out.skip[i] = decide(in.layer, *score) ? 1 : 0;
    }
  }
  // Algorithm 1: the call's last token decides for all of them.
  if (per_call_ && last && decide(in.layer, *last))
    std::fill(out.skip.begin() + static_cast<std::ptrdiff_t>(first_scored), out.skip.end(), 1);
}

}  // namespace ts
