#pragma once
// Static (calibrated) KV quantization ranges (KVSink section 4, "static" schemes S1/S3): per layer,
// the min and max of every K and V channel over a calibration slice, from a dense forward pass.
// The tokens a preservation policy keeps at full precision take no part in the ranges, as the
// paper requires: one range set per exclusion rule, all from the same pass,
//   none    every token;
//   pfn     all but positions 0..n-1 of each window (Preserve-First-N);
//   kvsink  all but KVSink's picks of each window, in the layers after the emergence layer.
// Stored in the kvsink profile (outlier_profile.h) and read by kvquant:ranges=static,profile=FILE.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"
#include "runtime/kv_cache.h"

namespace ts {

enum class RangeExclusion : uint8_t { None, Pfn, KvSink };
const char* exclusion_name(RangeExclusion e);

struct CalibratedRanges {
  RangeExclusion excluding = RangeExclusion::None;
  size_t preserved = 0;  // n (pfn) or k (kvsink) of the calibration; 0 for none
  KvStaticRanges ranges;
};

// One range set per exclusion rule (None, Pfn, KvSink, in that order), each of `windows` run as
// one call (KVSink picks its sinks per call: the top `preserved` |h[:, sink_channel]| at the output
// of block emergence_layer), `preserved` tokens excluded per window.
std::vector<CalibratedRanges> calibrate_kv_ranges(const Model& model, ThreadPool& pool,
                                                  std::span<const std::vector<int32_t>> windows,
                                                  uint32_t emergence_layer, uint32_t sink_channel,
                                                  size_t preserved);

nlohmann::json ranges_to_json(const CalibratedRanges& r);
CalibratedRanges ranges_from_json(const nlohmann::json& j, const std::string& path);

}  // namespace ts
