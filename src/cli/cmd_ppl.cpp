// tokensieve ppl: perplexity with llama.cpp's llama-perplexity protocol: tokenize the whole text,
// cut non-overlapping windows of CTX tokens, score the second half of each window.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "core/error.h"
#include "core/progress.h"
#include "runtime/transformer.h"

namespace ts::cli {
namespace {

struct PplOptions {
  ModelOptions model;
  std::string file;
  size_t chunks = 0;  // 0 = all
  bool json = false;
};

// log p(target | logits) with a max-shifted log-sum-exp in double precision.
double log_prob(const float* logits, size_t n_vocab, int32_t target) {
  float mx = logits[0];
  for (size_t i = 1; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
  double sum = 0.0;
  for (size_t i = 0; i < n_vocab; ++i) sum += std::exp(double(logits[i]) - mx);
  return double(logits[target]) - mx - std::log(sum);
}

void ppl(const PplOptions& o) {
  auto model = Model::load(o.model.model_path);
  const Tokenizer& tok = model->tokenizer();
  const std::string text = read_text_file(o.file);
  const std::vector<int32_t> tokens = tok.encode(text, tok.add_bos_default(), /*parse_special=*/false);
  const size_t n_ctx = o.model.ctx ? o.model.ctx : 512;
  TS_CHECK(n_ctx >= 8, "-c must be at least 8 for perplexity");
  size_t n_chunks = tokens.size() / n_ctx;
  TS_CHECK(n_chunks > 0, o.file, ": ", tokens.size(), " tokens is fewer than one window of ", n_ctx,
           " (lower -c)");
  if (o.chunks) n_chunks = std::min(n_chunks, o.chunks);

  ThreadPool pool(o.model.threads);
  Transformer tf(*model, pool, n_ctx);
  const size_t n_vocab = model->config().n_vocab, first = n_ctx / 2;
  double nll = 0.0, nll2 = 0.0;
  size_t count = 0;
  Progress progress("ppl", n_chunks);
  std::vector<int32_t> window(n_ctx);
  for (size_t c = 0; c < n_chunks; ++c) {
    std::copy_n(tokens.begin() + static_cast<std::ptrdiff_t>(c * n_ctx), n_ctx, window.begin());
    if (tok.add_bos_default()) window[0] = tok.bos();  // as llama-perplexity: each window starts at BOS
    tf.truncate(0);
    std::span<const float> logits = tf.forward(window, true);
    for (size_t i = first; i + 1 < n_ctx; ++i) {
      const double lp = log_prob(&logits[i * n_vocab], n_vocab, window[i + 1]);
      nll -= lp;
      nll2 += lp * lp;
      ++count;
    }
    const double running = std::exp(nll / double(count));
    if (!o.json) std::printf("[%zu]%.4f,", c + 1, running);
    std::fflush(stdout);
    progress.update(c + 1, cat("PPL ", running));
  }
  progress.finish();
  const double mean = nll / double(count);
  const double var = nll2 / double(count) - mean * mean;
  const double ppl_value = std::exp(mean);
  const double ppl_err = count > 1 ? ppl_value * std::sqrt(std::max(0.0, var) / double(count - 1)) : 0.0;
  if (o.json) {
    nlohmann::json j = {{"ppl", ppl_value},        {"ppl_stderr", ppl_err}, {"tokens_scored", count},
                        {"chunks", n_chunks},      {"ctx", n_ctx},          {"tokens_total", tokens.size()},
                        {"file", o.file},          {"model", o.model.model_path}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("\nFinal estimate: PPL = %.4f +/- %.5f (%zu tokens scored in %zu chunks of %zu)\n", ppl_value,
                ppl_err, count, n_chunks, n_ctx);
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
