#include "server/decisions_json.h"

namespace ts::server {

nlohmann::json decisions_json(const DecisionLog& log, std::span<const int32_t> tokens, const Model& model,
                              const std::string& request_id) {
  const size_t n_layers = model.config().n_layers, n_pos = tokens.size();
  std::vector<std::vector<uint8_t>> flags(n_layers, std::vector<uint8_t>(n_pos, kDenseToken));
  std::vector<std::vector<float>> scores(n_layers), keys(n_layers);
  // [layer][position][query head] key positions, when the log kept them.
  std::vector<std::vector<std::vector<uint32_t>>> key_lists(log.key_lists ? n_layers : 0);
  for (const LayerRecord& r : log.layers) {
    const BatchRecord& b = log.batches.at(r.batch);
    if (r.layer >= n_layers) continue;
    for (size_t t = 0; t < r.flags.size() && b.pos0 + t < n_pos; ++t) {
      flags[r.layer][b.pos0 + t] = r.flags[t];
      if (!r.scores.empty()) {
        if (scores[r.layer].empty()) scores[r.layer].assign(n_pos, 0.0f);
        scores[r.layer][b.pos0 + t] = r.scores[t];
      }
      if (!r.keys_attended.empty()) {
        // Mean over the query heads of how many keys the token's queries read.
        const size_t heads = r.keys_attended.size() / r.flags.size();
        if (keys[r.layer].empty()) keys[r.layer].assign(n_pos, 0.0f);
        float sum = 0;
        for (size_t h = 0; h < heads; ++h) sum += float(r.keys_attended[t * heads + h]);
        keys[r.layer][b.pos0 + t] = sum / float(heads);
      }
      if (!r.key_lists.empty()) {
        const size_t heads = r.key_lists.size() / r.flags.size();
        if (key_lists[r.layer].empty()) key_lists[r.layer].assign(n_pos * heads, {});
        for (size_t h = 0; h < heads; ++h)
          key_lists[r.layer][(b.pos0 + t) * heads + h] = r.key_lists[t * heads + h];
      }
    }
  }
  for (const EvictionRecord& e : log.evictions)
    for (const uint32_t pos : e.positions)
      if (e.layer < n_layers && pos < n_pos) flags[e.layer][pos] |= kEvicted;

  nlohmann::json token_texts = nlohmann::json::array();
  for (const int32_t id : tokens) token_texts.push_back(model.tokenizer().token_to_bytes(id, true));
  const auto rows = [](const std::vector<std::vector<float>>& per_layer) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& row : per_layer)
      out.push_back(row.empty() ? nlohmann::json(nullptr) : nlohmann::json(row));
    return out;
  };
  // The model's sliding windows (0: a global layer): a local layer's tokens attend to that many
  // positions whatever the policies keep.
  nlohmann::json windows = nlohmann::json::array();
  for (const LayerPlan& plan : model.config().layers) windows.push_back(plan.window);
  nlohmann::json out = {{"request_id", request_id},
                        {"policies", log.policies},
                        {"n_layers", n_layers},
                        {"layer_windows", std::move(windows)},
                        {"tokens", std::move(token_texts)},
                        {"flags", flags},
                        {"scores", rows(scores)},
                        {"keys_attended", rows(keys)},
                        {"ffn_fraction", log.ffn_fraction()},
                        {"legend",
                         {{"ran_attention", kRanAttention},
                          {"ran_ffn", kRanFfn},
                          {"kv_cached", kKvCached},
                          {"kv_full_precision", kKvFullPrecision},
                          {"kv_low_precision", kKvLowPrecision},
                          {"evicted", kEvicted}}}};
  if (log.key_lists) {
    const size_t heads = model.config().n_heads;
    nlohmann::json per_layer = nlohmann::json::array();
    for (const auto& lists : key_lists) {
      if (lists.empty()) {
        per_layer.push_back(nullptr);
        continue;
      }
      nlohmann::json positions = nlohmann::json::array();
      for (size_t p = 0; p < n_pos; ++p)
        positions.push_back(std::vector(lists.begin() + p * heads, lists.begin() + (p + 1) * heads));
      per_layer.push_back(std::move(positions));
    }
    out["key_lists"] = std::move(per_layer);
  }
  return out;
}

}  // namespace ts::server
