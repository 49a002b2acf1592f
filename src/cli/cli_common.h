#pragma once
// Options and helpers shared by the subcommands.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "core/thread_pool.h"
#include "model/model.h"

namespace ts::cli {

struct ModelOptions {
  std::string model_path;
  int threads = 0;  // 0 = all cores
  size_t ctx = 0;   // 0 = command default
};

// -m/--model (required), -t/--threads, and -c/--ctx when `with_ctx`.
void add_model_options(CLI::App& cmd, ModelOptions& opts, bool with_ctx);

std::string read_text_file(const std::string& path);
// Context size to use: the flag, else min(default_ctx, the model's training context).
size_t choose_ctx(const ModelOptions& opts, const Model& model, size_t default_ctx);

void register_run(CLI::App& app);
void register_ppl(CLI::App& app);
void register_info(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_bench(CLI::App& app);

}  // namespace ts::cli
