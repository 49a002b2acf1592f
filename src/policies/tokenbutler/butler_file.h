#pragma once
// The predictor's own file: safetensors (8-byte little-endian header length, JSON header, raw
// tensors), its config in the header's __metadata__. Tensors are F32 or F16 (half the size, for
// committed predictors). Training checkpoints use the same format with extra tensors (AdamW
// moments) and metadata (step).
#include <map>
#include <string>
#include <vector>

#include "policies/tokenbutler/butler_net.h"

namespace ts {

struct ButlerFile {
  ButlerWeights weights;
  std::map<std::string, std::string> metadata;      // besides the config: provenance, recall, step...
  std::map<std::string, std::vector<float>> extra;  // named extra tensors (optimizer state)
};

void save_butler(const std::string& path, const ButlerFile& file, bool f16);
// Throws ts::Error with the path on a missing, truncated or inconsistent file.
ButlerFile load_butler(const std::string& path);

}  // namespace ts
