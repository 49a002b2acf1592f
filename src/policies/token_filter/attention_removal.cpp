#include "policies/token_filter/attention_removal.h"

#include <algorithm>

#include "core/error.h"
#include "model/model.h"

namespace ts {

AttentionRemoval::AttentionRemoval(PolicyOptions& o) : Policy(o.spec()) {
  const std::optional<double> ratio = o.take_double("ratio", 0, 1);
  TS_CHECK(ratio.has_value(), "policy attnremove: give ratio=R, the fraction of layers without attention");
  ratio_ = *ratio;
  placement_ = o.take_choice<Placement>("placement", {{"tail", Placement::Tail}, {"head", Placement::Head}});
  cache_kv_ = o.take_choice<bool>("kv", {{"drop", false}, {"cache", true}});
}

void AttentionRemoval::bind(const Model& model) {
  if (ratio_ > 0) layers_ = placed_layers(placement_, ratio_, model.config().n_layers);
}

void AttentionRemoval::skip_attention(const LayerInput&, const KvRows&, const RowSet&, AttentionSkips& out) {
  std::fill(out.skip.begin(), out.skip.end(), 1);
  out.cache_skipped_kv = cache_kv_;
}

}  // namespace ts
