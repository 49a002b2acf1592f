#include "policies/token_filter/attention_removal.h"

#include <algorithm>

#include "core/error.h"
#include "model/model.h"

namespace ts {

PolicyOptionList AttentionRemoval::options() {
  return {number_option("ratio", 0, 1, "", "fraction of the layers without attention"),
          choice_option("placement", {"tail", "head"}, "the last or the first layers"),
          choice_option("kv", {"drop", "cache"}, "whether those layers still cache K/V")};
}

AttentionRemoval::AttentionRemoval(PolicyOptions& o) : Policy(o.spec()) {
  const std::optional<double> ratio = o.number("ratio");
  TS_CHECK(ratio.has_value(), "policy attnremove: give ratio=R, the fraction of layers without attention");
  ratio_ = *ratio;
  placement_ = o.choice<Placement>("placement", {Placement::Tail, Placement::Head});
  cache_kv_ = o.choice<bool>("kv", {false, true});
}

void AttentionRemoval::bind(const Model& model) {
  if (ratio_ > 0) layers_ = placed_layers(placement_, ratio_, model.config().n_layers);
}

void AttentionRemoval::skip_attention(const LayerInput&, const KvRows&, const RowSet&, AttentionSkips& out) {
  std::fill(out.skip.begin(), out.skip.end(), 1);
  out.cache_skipped_kv = cache_kv_;
}

}  // namespace ts
