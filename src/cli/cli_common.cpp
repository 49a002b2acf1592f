#include "cli/cli_common.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace ts::cli {

void add_model_options(CLI::App& cmd, ModelOptions& opts, bool with_ctx) {
  cmd.add_option("-m,--model", opts.model_path, "GGUF model file")->required();
  cmd.add_option("-t,--threads", opts.threads, "threads (default: all cores)")->check(CLI::Range(0, 1024));
  if (with_ctx) cmd.add_option("-c,--ctx", opts.ctx, "context size in tokens")->check(CLI::Range(1, 1 << 20));
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TS_CHECK(in, path, ": cannot open file");
  std::ostringstream ss;
  ss << in.rdbuf();
  TS_CHECK(!in.bad(), path, ": read error");
  return ss.str();
}

size_t choose_ctx(const ModelOptions& opts, const Model& model, size_t default_ctx) {
  if (opts.ctx) return opts.ctx;
  return std::min<size_t>(default_ctx, model.config().n_ctx_train);
}

}  // namespace ts::cli
