#include "policies/kvquant/sink_preservation.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/model.h"
#include "policies/kvquant/outlier_profile.h"

namespace ts {

PolicyOptionList PreserveFirstN::options() {
  return {integer_option("n", 0, 1u << 20, "", "positions 0..n-1 keep full-precision K/V")};
}

PreserveFirstN::PreserveFirstN(PolicyOptions& options) : Policy(options.spec()) {
  const std::optional<uint64_t> n = options.integer("n");
  TS_CHECK(n, "policy ", options.spec().text(), ": needs n=N (tokens kept at full precision)");
  n_ = *n;
}

void PreserveFirstN::choose_kv_storage(const LayerInput&, const KvRows& kv, std::span<KvStorage> storage) {
  for (size_t i = 0; i < kv.rows->size(); ++i)
    if (kv.pos0 + (*kv.rows)[i] < n_ && storage[i] == KvStorage::Default) storage[i] = KvStorage::Full;
}

PolicyOptionList KvSink::options() {
  return {integer_option("k", 0, 1u << 20, "5", "prompt tokens kept at full precision"),
          path_option("profile", "the outlier profile (tokensieve calibrate kvsink)"),
          integer_option("layer", 0, 1u << 10, "", "the block whose output is scored, instead of profile"),
          integer_option("channel", 0, 1u << 20, "", "the outlier channel, with layer")};
}

KvSink::KvSink(PolicyOptions& options) : Policy(options.spec()) {
  k_ = *options.integer("k");
  profile_ = options.path("profile").value_or("");
  const std::optional<uint64_t> layer = options.integer("layer");
  const std::optional<uint64_t> channel = options.integer("channel");
  TS_CHECK(profile_.empty() != !(layer && channel), "policy ", options.spec().text(),
           ": give either profile=FILE or both layer=L and channel=C");
  if (layer) layer_ = static_cast<uint32_t>(*layer), channel_ = static_cast<uint32_t>(*channel);
}

void KvSink::bind(const Model& model) {
  if (!profile_.empty()) {
    const OutlierProfile p = read_outlier_profile(profile_, model);
    layer_ = p.emergence_layer;
    channel_ = p.channel;
  }
  const ModelConfig& c = model.config();
  n_layers_ = c.n_layers;
  TS_CHECK(layer_ + 1 < c.n_layers, "policy ", describe(), ": the emergence layer must be below the last (",
           c.n_layers - 1, ")");
  TS_CHECK(channel_ < c.n_embd, "policy ", describe(), ": channel ", channel_, " >= hidden size ", c.n_embd);
}

std::vector<HookClaim> KvSink::claims() const {
  std::vector<uint32_t> after;
  for (uint32_t l = layer_ + 1; l < n_layers_; ++l) after.push_back(l);
  return {{Hook::ObserveLayerInput, {layer_ + 1}}, {Hook::KvStorage, after}};
}

void KvSink::truncate(size_t n_past) {
  std::erase_if(top_, [&](const auto& e) { return e.second >= n_past; });
  if (kept_.size() > n_past) kept_.resize(n_past);
}

// The input of block layer_ + 1 is the output H of block layer_.
void KvSink::observe_layer_input(const LayerInput& in) {
  if (in.n_tok < 2) return;
  for (size_t t = 0; t < in.n_tok; ++t)
    top_.emplace_back(std::abs(in.residual[t * in.dim + channel_]), static_cast<uint32_t>(in.pos0 + t));
  // Largest first; ties to the earlier position.
  std::sort(top_.begin(), top_.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  if (top_.size() > k_) top_.resize(k_);
  kept_.resize(std::max(kept_.size(), in.pos0 + in.n_tok), 0);
  for (const auto& [v, pos] : top_) kept_[pos] = 1;
}

void KvSink::choose_kv_storage(const LayerInput&, const KvRows& kv, std::span<KvStorage> storage) {
  for (size_t i = 0; i < kv.rows->size(); ++i) {
    const size_t pos = kv.pos0 + (*kv.rows)[i];
    if (keeps(pos) && storage[i] == KvStorage::Default) storage[i] = KvStorage::Full;
  }
}

std::vector<uint32_t> KvSink::sinks() const {
  std::vector<uint32_t> s;
  for (size_t p = 0; p < kept_.size(); ++p)
    if (kept_[p]) s.push_back(static_cast<uint32_t>(p));
  return s;
}

}  // namespace ts
