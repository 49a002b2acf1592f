// tokensieve info: architecture, shapes, tokenizer and tensor types of a GGUF model.
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/reports.h"
#include "policies/builtin_policies.h"
#include "runtime/kv_cache.h"

namespace ts::cli {
namespace {

struct InfoOptions {
  ModelOptions model;
  std::vector<std::string> policies;  // a kvquant policy sets the KV format counted
  bool json = false;
};

void info(const InfoOptions& o) {
  auto model = Model::load(o.model.model_path);
  const nlohmann::json j = info_report(*model, o.model.model_path, o.policies);
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  for (auto& [k, v] : j.items()) std::printf("%-20s %s\n", k.c_str(), v.dump().c_str());
}

}  // namespace

nlohmann::json info_report(const Model& model, const std::string& path,
                           const std::vector<std::string>& policies) {
  const ModelConfig& c = model.config();
  const Tokenizer& tok = model.tokenizer();
  std::map<std::string, size_t> type_counts;
  uint64_t n_params = 0;
  for (const GgufTensor& t : model.gguf().tensors()) {
    ++type_counts[std::string(quant_traits(t.type).name)];
    n_params += t.n_elements;
  }
  // Tied models store no output.weight, so parameters counted are the distinct stored ones.
  const std::unique_ptr<PolicyStack> stack = make_policy_stack(policies, model);
  const KvFormat format = stack && stack->kv_format() ? *stack->kv_format() : KvFormat{};
  const KvCache one_token(c.n_layers, 1, c.kv_dim(), c.head_dim, format);
  // Sliding-window layers: their window, by layer (empty: every layer attends to all keys).
  nlohmann::json windows = nlohmann::json::object();
  for (size_t l = 0; l < c.layers.size(); ++l)
    if (c.layers[l].window > 0) windows[std::to_string(l)] = c.layers[l].window;
  nlohmann::json ropes = nlohmann::json::array();
  for (const RopeSpec& r : c.ropes) ropes.push_back({{"base", r.base}, {"linear_scale", r.linear_scale}});
  nlohmann::json j = {
      {"file", path},
      {"gguf_version", model.gguf().version()},
      {"name", c.name},
      {"architecture", c.arch},
      {"n_layers", c.n_layers},
      {"n_embd", c.n_embd},
      {"n_ff", c.n_ff},
      {"n_heads", c.n_heads},
      {"n_kv_heads", c.n_kv_heads},
      {"head_dim", c.head_dim},
      {"q_dim", c.q_dim},
      {"sliding_windows", windows},
      {"ropes", ropes},
      {"rope_dim", c.rot_dim},
      {"rope_base", c.ropes[0].base},
      {"rope_layout", c.traits.rope_layout == RopeLayout::Neox ? "neox" : "interleaved"},
      {"n_ctx_train", c.n_ctx_train},
      {"rms_eps", c.rms_eps},
      {"n_vocab", c.n_vocab},
      {"n_params", n_params},
      {"weight_bytes", model.weight_bytes()},
      {"kv_format", format.describe()},
      {"kv_bytes_per_token", one_token.bytes_per_token()},
      {"kv_full_token_bytes", one_token.full_token_bytes() * c.n_layers},
      {"tied_output", model.gguf().find_tensor("output.weight") == nullptr},
      {"tokenizer",
       {{"model", tok.model_name()},
        {"pre", tok.pre_name()},
        {"bos", tok.bos()},
        {"eos", tok.eos()},
        {"add_bos", tok.add_bos_default()}}},
      {"tensor_types", type_counts},
  };
  return j;
}

void register_info(CLI::App& app) {
  auto opts = std::make_shared<InfoOptions>();
  CLI::App* cmd = app.add_subcommand("info", "describe a GGUF model");
  add_model_options(*cmd, opts->model, false);
  add_policy_option(*cmd, opts->policies);
  cmd->add_flag("--json", opts->json, "print one JSON object on stdout");
  cmd->callback([opts] { info(*opts); });
}

}  // namespace ts::cli
