#pragma once
// Layer profiles: the layers a layer-wise policy acts on, as a calibration search chose them for
// one model, stored as JSON:
//   {
//     "format": "tokensieve-layer-profile", "version": 1,
//     "model": "SmolLM2-135M-Instruct",          (informational)
//     "model_hash": "fnv1a64:0123456789abcdef",  (model_fingerprint() of the GGUF searched on)
//     "policy": "orthorank",                     (what the layers become: orthorank | sleb | shortened)
//     "method": "sleb",                          (the search: sleb = iterative greedy, shortened = one-shot)
//     "layers": [3, 5, 7],                       (ascending)
//     "ratio": 0.333,                            (orthorank only: fraction of tokens that run those layers)
//     "sparsity": 0.2,                           (the token-layer sparsity the search aimed at)
//     "calibration": {...}                       (optional, free-form provenance, kept as is)
//   }
#include <optional>
#include <string>
#include <vector>

#include "model/model.h"

namespace ts {

struct LayerProfile {
  std::string model_name, model_hash, policy, method;
  std::vector<uint32_t> layers;
  std::optional<double> ratio;
  double sparsity = 0;
  std::string calibration_json = "{}";  // a JSON object
};

// Throws ts::Error naming the file and the offending field.
LayerProfile read_layer_profile(const std::string& path);
void write_layer_profile(const std::string& path, const LayerProfile& profile);

// FNV-1a (64-bit, over 8-byte little-endian words) of the tensor table and all tensor data: the
// same weights in the same file layout give the same value, metadata edits do not matter.
std::string model_fingerprint(const Model& model);

// Throws unless the profile is for this policy and was searched on this model.
void check_profile_fits(const LayerProfile& profile, const std::string& path, const std::string& policy,
                        const Model& model);

}  // namespace ts
