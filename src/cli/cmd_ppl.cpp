// tokensieve ppl: perplexity with llama.cpp's llama-perplexity protocol: tokenize the whole text,
// cut non-overlapping windows of CTX tokens, score the second half of each window.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "core/error.h"
#include "core/progress.h"
#include "eval/perplexity.h"

namespace ts::cli {
namespace {

struct PplOptions {
  ModelOptions model;
  std::string file;
  size_t chunks = 0;  // 0 = all
  bool json = false;
};

void ppl(const PplOptions& o) {
  auto model = Model::load(o.model.model_path);
  const Tokenizer& tok = model->tokenizer();
  const std::string text = read_text_file(o.file);
  // As llama-perplexity: special-token text in the file is plain text; BOS only if the model adds it.
  const std::vector<int32_t> tokens = tok.encode(text, tok.add_bos_default(), /*parse_special=*/false);
  const size_t n_ctx = o.model.ctx ? o.model.ctx : 512;
  ThreadPool pool(o.model.threads);
  Transformer tf(*model, pool, n_ctx);
  const size_t n_windows = o.chunks ? std::min(o.chunks, tokens.size() / n_ctx) : tokens.size() / n_ctx;
  Progress progress("ppl", n_windows);
  const PerplexityResult r = perplexity_windows(
      tf, tokens, n_ctx, o.chunks, tok.add_bos_default() ? tok.bos() : -1,
      [&](size_t done, const NllAccumulator& acc) {
        if (!o.json) std::printf("[%zu]%.4f,", done, acc.ppl());
        std::fflush(stdout);
        progress.update(done, cat("PPL ", acc.ppl()));
      });
  progress.finish();
  if (o.json) {
    nlohmann::json j = {{"ppl", r.acc.ppl()},   {"ppl_stderr", r.acc.ppl_stderr()}, {"tokens_scored", r.acc.count},
                        {"chunks", r.chunks},   {"ctx", n_ctx},                     {"tokens_total", tokens.size()},
                        {"file", o.file},       {"model", o.model.model_path}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("\nFinal estimate: PPL = %.4f +/- %.5f (%zu tokens scored in %zu chunks of %zu)\n", r.acc.ppl(),
                r.acc.ppl_stderr(), r.acc.count, r.chunks, n_ctx);
  }
}

}  // namespace

void register_ppl(CLI::App& app) {
  auto opts = std::make_shared<PplOptions>();
  CLI::App* cmd = app.add_subcommand("ppl", "perplexity of a text file (llama-perplexity protocol)");
  add_model_options(*cmd, opts->model, true);
  cmd->add_option("-f,--file", opts->file, "text file")->required();
  cmd->add_option("--chunks", opts->chunks, "score at most N windows (default: all)");
  cmd->add_flag("--json", opts->json, "print one JSON object on stdout");
  cmd->callback([opts] { ppl(*opts); });
}

}  // namespace ts::cli
