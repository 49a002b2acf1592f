#include "policies/builtin_policies.h"

#include "policies/orthorank/orthorank.h"
#include "policies/sleb/layer_removal.h"
#include "policies/token_filter/attention_removal.h"
#include "policies/token_filter/token_filter.h"

namespace ts {
namespace {

template <typename P>
std::unique_ptr<Policy> make(PolicyOptions& options) {
  return std::make_unique<P>(options);
}

PolicyRegistry build_registry() {
  PolicyRegistry r;
  r.add(
      {"orthorank",
       "layers=LIST|profile=FILE[,ratio=0.333][,select=ortho|reverse|random][,seed=N][,stage=normed|residual]"
       "[,kv=all|selected]: in those layers only the tokens most orthogonal to the sink run the layer",
       make<OrthoRank>});
  r.add({"sleb", "layers=LIST|profile=FILE: remove those layers (SLEB's search)", make<LayerRemoval>});
  r.add({"shortened", "layers=LIST|profile=FILE: remove those layers (Shortened LLaMA's one-shot search)",
         make<LayerRemoval>});
  r.add({"tokenfilter",
         "ratio=0.5[,tail=0.5][,placement=tail|head|uniform][,select=kv|k|v|random]"
         "[,fusion=printed|intent|mean][,anchor=ema|mean][,decay=0.9][,anchor_update=after|before]"
         "[,variance=instant|running][,update=eq4|alg1][,control=layer|global][,lr=0.01][,threshold=0.5]"
         "[,state=sequence|run][,decide=token|call][,kv=drop|cache][,seed=N]: Token Filtering, tokens whose "
         "K/V resemble the running anchors skip attention in the last tail fraction of layers",
         make<TokenFilter>});
  r.add({"attnremove",
         "ratio=R[,placement=tail|head][,kv=drop|cache]: no attention in the last (first) "
         "round(R*L) layers for any token; the FFN runs",
         make<AttentionRemoval>});
  return r;
}

}  // namespace

const PolicyRegistry& builtin_policies() {
  static const PolicyRegistry registry = build_registry();
  return registry;
}

std::unique_ptr<PolicyStack> make_policy_stack(std::span<const std::string> specs, const Model& model) {
  if (specs.empty()) return nullptr;
  std::vector<std::unique_ptr<Policy>> policies;
  for (const std::string& spec : specs) policies.push_back(builtin_policies().create(spec));
  return std::make_unique<PolicyStack>(std::move(policies), model);
}

}  // namespace ts
