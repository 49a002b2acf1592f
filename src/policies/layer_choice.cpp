#include "policies/layer_choice.h"

#include "core/error.h"

namespace ts {

PolicyOptionList LayerChoice::options() {
  return {list_option("layers", "the layers, e.g. 3,5,8-11"),
          path_option("profile", "a layer profile JSON (tokensieve calibrate), instead of layers")};
}

LayerChoice::LayerChoice(PolicyOptions& options) {
  const std::optional<std::vector<uint32_t>> layers = options.list("layers");
  profile_path_ = options.path("profile");
  const std::string& name = options.spec().name;
  TS_CHECK(layers.has_value() != profile_path_.has_value(), "policy ", name,
           ": give the layers, either layers=LIST or profile=FILE");
  if (layers) layers_ = *layers;
}

void LayerChoice::bind(const Model& model, const std::string& policy) {
  if (!profile_path_) return;
  profile_ = read_layer_profile(*profile_path_);
  check_profile_fits(*profile_, *profile_path_, policy, model);
  layers_ = profile_->layers;
}

}  // namespace ts
