#include "cli/cli_common.h"

#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "policies/builtin_policies.h"

namespace ts::cli {

void add_model_options(CLI::App& cmd, ModelOptions& opts, bool runs_model) {
  cmd.add_option("-m,--model", opts.model_path, "GGUF model file")->required();
  cmd.add_option("-t,--threads", opts.threads, "threads (default: all cores)")->check(CLI::Range(0, 1024));
  if (!runs_model) return;
  cmd.add_option("-c,--ctx", opts.ctx, "context size in tokens")->check(CLI::Range(1, 1 << 20));
  cmd.add_flag(
      "--exact", opts.exact,
      "float32 activations in matrix products instead of 8-bit blocks (slower; for reference checks)");
  add_policy_option(cmd, opts.policies);
}

void add_policy_option(CLI::App& cmd, std::vector<std::string>& specs) {
  std::string help = "token-sparsification policy NAME[:KEY=VALUE,...], repeatable (applied in order):";
  for (const PolicyEntry& e : builtin_policies().entries()) help += cat("\n  ", e.help());
  cmd.add_option("--policy", specs, help)->expected(1)->take_all()->check([](const std::string& spec) {
    try {
      builtin_policies().create(spec);
      return std::string();
    } catch (const Error& e) {
      return std::string(e.what());
    }
  });
}

void attach_policies(const ModelOptions& opts, const Model& model, Transformer& tf) {
  tf.set_policies(make_policy_stack(opts.policies, model));
}

nlohmann::json policy_sparsity(const Transformer& tf) {
  if (!tf.policies()) return nullptr;
  const StepCounts& c = tf.policies()->counts();
  return sparsity_json(c);
}

nlohmann::json sparsity_json(const StepCounts& c) {
  // The counts beside the fractions, so that the shards of a run add up to the whole run's.
  return {{"attention_fraction", c.fraction(c.attention)},
          {"ffn_fraction", c.fraction(c.ffn)},
          {"kv_fraction", c.fraction(c.kv_cached)},
          {"token_layers", c.token_layers},
          {"attention_token_layers", c.attention},
          {"ffn_token_layers", c.ffn},
          {"kv_token_layers", c.kv_cached}};
}

void print_sparsity(const nlohmann::json& sparsity) {
  if (sparsity.is_null()) return;
  std::fprintf(
      stderr,
      "policies: of %llu (token, layer) pairs %.2f%% ran attention, %.2f%% the FFN, %.2f%% cached K/V\n",
      sparsity["token_layers"].get<unsigned long long>(), 100 * sparsity["attention_fraction"].get<double>(),
      100 * sparsity["ffn_fraction"].get<double>(), 100 * sparsity["kv_fraction"].get<double>());
}

std::string held_kv_summary(const KvCache& cache, size_t n_layers) {
  std::string per_layer;
  double total = 0.0;
  for (size_t l = 0; l < n_layers; ++l) {
    const double f = cache.held_fraction(l);
    total += f;
    char buf[16];
    std::snprintf(buf, sizeof buf, "%s%.1f", l ? " " : "", 100.0 * f);
    per_layer += buf;
  }
  char head[64];
  std::snprintf(head, sizeof head,
                "KV held: %.1f%% (per layer: ", 100.0 * total / static_cast<double>(n_layers));
  return head + per_layer + ")";
}

std::string default_data_dir() {
  const char* env = std::getenv("TS_DATA_DIR");
  return env && *env ? env : "../shared/data";
}

void add_data_dir_option(CLI::App& cmd, std::string& dir) {
  dir = default_data_dir();
  cmd.add_option("--data-dir", dir, "evaluation data directory (default: $TS_DATA_DIR, else ../shared/data)");
}

void add_shard_option(CLI::App& cmd, Shard& shard, const std::string& what) {
  cmd.add_option_function<std::string>(
         "--shard",
         [&shard](const std::string& text) {
           try {
             shard = parse_shard(text);
           } catch (const Error& e) {
             throw CLI::ValidationError("--shard", e.what());
           }
         },
         "I/N: run only the I-th of N contiguous parts of the " + what +
             " (0 <= I < N); the parts' "
             "--samples files, concatenated in order, are the whole run's")
      ->type_name("I/N");
}

size_t choose_ctx(const ModelOptions& opts, const Model& model, size_t default_ctx) {
  if (opts.ctx) return opts.ctx;
  return std::min<size_t>(default_ctx, model.config().n_ctx_train);
}

}  // namespace ts::cli
