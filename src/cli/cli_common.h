#pragma once
// Options and helpers shared by the subcommands.
#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/thread_pool.h"
#include "eval/data_file.h"
#include "eval/subset.h"
#include "model/model.h"
#include "runtime/transformer.h"

namespace ts::cli {

struct ModelOptions {
  std::string model_path;
  int threads = 0;                    // 0 = all cores
  size_t ctx = 0;                     // 0 = command default
  bool exact = false;                 // float activations in matrix products (see MatmulPrecision)
  std::vector<std::string> policies;  // --policy specs, in order (none: dense)
  MatmulPrecision precision() const { return exact ? MatmulPrecision::Exact : MatmulPrecision::Fast; }
};

// -m/--model (required), -t/--threads, and for commands that run the model -c/--ctx, --exact
// and --policy.
void add_model_options(CLI::App& cmd, ModelOptions& opts, bool runs_model);
// --policy NAME[:KEY=VALUE,...], repeatable; each spec is checked while the flags are parsed.
void add_policy_option(CLI::App& cmd, std::vector<std::string>& specs);
// The opts.policies stack for this model on `tf` (nothing without --policy).
void attach_policies(const ModelOptions& opts, const Model& model, Transformer& tf);
// "KV held: 45.2% (per layer: 100 98.1 ...)": the fraction of the cached positions each layer holds.
std::string held_kv_summary(const KvCache& cache, size_t n_layers);

// Fractions of the (token, layer) pairs that ran attention, the FFN and wrote K/V under the
// attached policies: an object for --json reports (null without policies), and as one stderr line.
nlohmann::json policy_sparsity(const Transformer& tf);
nlohmann::json sparsity_json(const StepCounts& counts);
void print_sparsity(const nlohmann::json& sparsity);

// --shard I/N: score only the I-th of N contiguous parts of the `what` (a distributed sweep's unit).
void add_shard_option(CLI::App& cmd, Shard& shard, const std::string& what);

// The evaluation data directory: $TS_DATA_DIR, else ../shared/data (relative to the working
// directory, i.e. next to the repository when run from its root).
std::string default_data_dir();
// --data-dir DIR, defaulting to default_data_dir().
void add_data_dir_option(CLI::App& cmd, std::string& dir);

// The threads and forward pass an evaluation scores with: the one place commands build them, so
// options that change the forward pass (later: token-sparsification policies) reach every command.
class EvalRuntime {
 public:
  EvalRuntime(const ModelOptions& opts, const Model& model, size_t n_ctx)
      : pool_(opts.threads), transformer_(model, pool_, n_ctx, opts.precision()) {
    attach_policies(opts, model, transformer_);
  }
  Transformer& transformer() { return transformer_; }

 private:
  ThreadPool pool_;
  Transformer transformer_;
};

// Context size to use: the flag, else min(default_ctx, the model's training context).
size_t choose_ctx(const ModelOptions& opts, const Model& model, size_t default_ctx);

void register_run(CLI::App& app);
void register_ppl(CLI::App& app);
void register_info(CLI::App& app);
void register_policies(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_bench(CLI::App& app);
void register_eval(CLI::App& app);
void register_compare(CLI::App& app);
void register_serve(CLI::App& app);
void register_sweep(CLI::App& app);
void register_train_butler(CLI::App& app);
void register_butler_recall(CLI::App& app);
void register_calibrate(CLI::App& app);
void register_analyze(CLI::App& app);
void register_outliers(CLI::App& app);  // analyze outliers (after register_analyze)

}  // namespace ts::cli
