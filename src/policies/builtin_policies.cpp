#include "policies/builtin_policies.h"

#include "policies/orthorank/orthorank.h"
#include "policies/sleb/layer_removal.h"

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
