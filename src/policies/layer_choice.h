#pragma once
// The layers=LIST | profile=FILE options of layer-wise policies (OrthoRank, SLEB): exactly one.
#include <optional>
#include <string>
#include <vector>

#include "policies/layer_profile.h"
#include "runtime/policy.h"

namespace ts {

class LayerChoice {
 public:
  // Takes layers= and profile= from the options.
  explicit LayerChoice(PolicyOptions& options);
  static PolicyOptionList options();  // declared once: parser, help, Python and README
  // The listed layers, or the profile's after checking that it is for `policy` on this model.
  void bind(const Model& model, const std::string& policy);
  const std::vector<uint32_t>& layers() const { return layers_; }
  const std::optional<LayerProfile>& profile() const { return profile_; }

 private:
  std::optional<std::string> profile_path_;
  std::vector<uint32_t> layers_;
  std::optional<LayerProfile> profile_;
};

}  // namespace ts
