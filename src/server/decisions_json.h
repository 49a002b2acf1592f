#pragma once
// The policies' decisions during one request as a tokens x layers grid, for the web page's heatmap.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/decision_log.h"

namespace ts::server {

// Cell bit set on top of decision_log.h's TokenFlag bits: a later call evicted the position's K/V
// from that layer.
inline constexpr uint8_t kEvicted = 32;
static_assert((kEvicted & (kDenseToken | kKvFullPrecision | kKvLowPrecision)) == 0,
              "kEvicted must not share a bit with a TokenFlag");

// {"request_id", "policies": [spec...], "n_layers", "layer_windows": [window per layer, 0: global],
//  "tokens": [text per position],
//  "flags": [layer][position] TokenFlag bits (+kEvicted), "scores": [layer][position] or null per
//  layer when no policy reported scores there, "keys_attended": [layer][position] mean keys read per
//  query head (or null per layer without key selection), "ffn_fraction", "legend": {bit name: value}};
//  with DecisionLog::key_lists also "key_lists": [layer][position][query head] the key positions
//  attended (null per layer without key selection; [] where the row did not attend or no batch
//  recorded the position).
// `tokens`: those the model ran, position by position. Positions no batch recorded (dense requests record
// nothing) are dense.
nlohmann::json decisions_json(const DecisionLog& log, std::span<const int32_t> tokens, const Model& model,
                              const std::string& request_id);

}  // namespace ts::server
