#pragma once
// The probe texts and the stable-outlier search shared by `analyze outliers` (prints the per-block
// channels and KVSink's picks) and `calibrate kvsink` (writes them, with static KV ranges, as the
// kvsink profile).
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "policies/kvquant/outlier_profile.h"

namespace ts::cli {

struct OutlierProbe {
  std::vector<std::string> prompts;
  std::string file;
  size_t file_tokens = 512, top = 4, sinks = 5;
  bool bos = false;
};

// --prompt, -f/--file, --file-tokens, --top, --sinks, --bos.
void add_outlier_probe_options(CLI::App& cmd, OutlierProbe& o);

struct OutlierFindings {
  OutlierProfile profile;  // sink channel, emergence layer, per-block top channels
  nlohmann::json sinks;    // per probe text: [{"position", "token"}] that KVSink-`sinks` keeps
};

// Runs the probe texts (default: the KVSink paper's two prompts) densely.
OutlierFindings find_outliers(const OutlierProbe& o, const Model& model, ThreadPool& pool);

}  // namespace ts::cli
