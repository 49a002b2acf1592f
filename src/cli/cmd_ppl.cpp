// tokensieve ppl: perplexity of a text file or a named dataset under one of two protocols:
//   llamacpp  llama-perplexity: non-overlapping windows of CTX tokens (the first replaced by BOS
//             when the model adds BOS), each scored on its second half;
//   stride    HF transformers' sliding window: windows of CTX tokens every S tokens, each scoring
//             the tokens no earlier window scored; S = CTX is GPTQ's protocol.
// WikiText-2 and -f default to llamacpp with CTX 512; C4 to GPTQ's setup (stride, CTX 2048,
// 256 windows).
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/reports.h"
#include "core/error.h"
#include "core/progress.h"
#include "eval/perplexity.h"
#include "eval/ppl_datasets.h"

namespace ts::cli {
namespace {

struct PplOptions : PplRequest {
  bool json = false;
};

void ppl(const PplOptions& o) {
  ppl_protocol(o);  // usage errors before any file is read
  const PplCorpus corpus =
      o.file.empty() ? load_ppl_corpus(o.dataset, o.data_dir) : PplCorpus{o.file, read_text_file(o.file)};
  auto model = Model::load(o.model.model_path);
  const nlohmann::json j = ppl_report(*model, o, corpus, !o.json);
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf(
      "\nFinal estimate: PPL = %.4f +/- %.5f (%zu tokens scored in %zu windows of %zu, %s protocol)\n",
      j["ppl"].get<double>(), j["ppl_stderr"].get<double>(), j["tokens_scored"].get<size_t>(),
      j["chunks"].get<size_t>(), j["ctx"].get<size_t>(), j["protocol"].get<std::string>().c_str());
  if (j.contains("sparsity")) print_sparsity(j["sparsity"]);
}

}  // namespace

std::string ppl_protocol(const PplRequest& o) {
  // Flag combinations are usage errors (exit 2), like the checks CLI11 makes itself.
  if (o.file.empty() == o.dataset.empty()) throw CLI::RequiredError("-f FILE or --dataset NAME");
  const std::string protocol = !o.protocol.empty() ? o.protocol : o.dataset == "c4" ? "stride" : "llamacpp";
  if (protocol != "stride" && o.stride) throw CLI::ValidationError("--stride", "needs --protocol stride");
  return protocol;
}

nlohmann::json ppl_report(const Model& model, const PplRequest& o, const PplCorpus& corpus,
                          bool print_windows) {
  const bool c4 = o.dataset == "c4";
  const std::string protocol = ppl_protocol(o);
  const Tokenizer& tok = model.tokenizer();
  const size_t n_ctx = c4 ? choose_ctx(o.model, model, 2048) : o.model.ctx ? o.model.ctx : 512;
  // As llama-perplexity: special-token text in the file is plain text; BOS only if the model adds it.
  std::vector<int32_t> tokens = tok.encode(corpus.text, tok.add_bos_default(), /*parse_special=*/false);
  const size_t tokens_total = tokens.size();
  if (corpus.max_windows) {
    // GPTQ's nsamples = numel // seqlen: whole windows only.
    TS_CHECK(tokens.size() >= n_ctx, tokens.size(), " tokens is fewer than one window of ", n_ctx,
             " (lower -c)");
    tokens.resize(std::min(tokens.size() / n_ctx, corpus.max_windows) * n_ctx);
  }
  const size_t stride = o.stride ? o.stride : n_ctx;

  EvalRuntime rt(o.model, model, n_ctx);
  const size_t all_windows =
      protocol == "stride" ? strided_window_count(tokens.size(), n_ctx, stride) : tokens.size() / n_ctx;
  std::ofstream samples;
  if (!o.samples_path.empty()) {
    samples.open(o.samples_path);
    TS_CHECK(samples, o.samples_path, ": cannot create file");
  }
  const auto [first_window, end_window] =
      o.shard.range(o.chunks ? std::min(o.chunks, all_windows) : all_windows);
  Progress progress("ppl", end_window - first_window);
  const OnWindow on_window = [&](size_t done, const NllAccumulator& acc, std::span<const double> log_probs) {
    if (print_windows) {
      std::printf("[%zu]%.4f,", done, acc.ppl());
      std::fflush(stdout);
    }
    if (samples.is_open()) {  // one line per window: what `tokensieve compare` pairs and resamples
      nlohmann::json nll = nlohmann::json::array();
      double sum = 0.0;
      for (const double lp : log_probs) {
        nll.push_back(-lp);
        sum -= lp;
      }
      samples << nlohmann::json{{"window", done - 1},
                                {"tokens", log_probs.size()},
                                {"nll_sum", sum},
                                {"nll", nll}}
                     .dump()
              << '\n';
    }
    progress.update(done - first_window, cat("PPL ", acc.ppl()));
  };
  const PerplexityResult r =
      protocol == "stride"
          ? perplexity_strided(rt.transformer(), tokens, n_ctx, stride, o.chunks, on_window, o.shard)
          : perplexity_windows(rt.transformer(), tokens, n_ctx, o.chunks,
                               tok.add_bos_default() ? tok.bos() : -1, on_window, o.shard);
  progress.finish();
  TS_CHECK(!samples.is_open() || samples.flush(), o.samples_path, ": write error");
  nlohmann::json j = {{"ppl", r.acc.ppl()},
                      {"ppl_stderr", r.acc.ppl_stderr()},
                      {"tokens_scored", r.acc.count},
                      {"chunks", r.chunks},
                      {"ctx", n_ctx},
                      {"tokens_total", tokens_total},
                      {"tokens_used", tokens.size()},
                      {"dataset", o.dataset.empty() ? nlohmann::json() : nlohmann::json(o.dataset)},
                      {"protocol", protocol},
                      {"file", corpus.path},
                      {"model", o.model.model_path}};
  if (protocol == "stride") j["stride"] = stride;
  if (rt.transformer().policies()) j["sparsity"] = policy_sparsity(rt.transformer());
  return j;
}

void add_ppl_options(CLI::App& cmd, PplRequest& r) {
  add_model_options(cmd, r.model, true);
  CLI::Option* file = cmd.add_option("-f,--file", r.file, "text file");
  cmd.add_option("--dataset", r.dataset, "wikitext2 | c4, read from --data-dir")
      ->check(CLI::IsMember({"wikitext2", "c4"}))
      ->excludes(file);
  add_data_dir_option(cmd, r.data_dir);
  cmd.add_option("--protocol", r.protocol, "llamacpp | stride (default: stride for c4, else llamacpp)")
      ->check(CLI::IsMember({"llamacpp", "stride"}));
  cmd.add_option("--stride", r.stride, "stride protocol: tokens between window starts (default: CTX)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--chunks,--limit", r.chunks, "score at most N windows (default: all)");
  cmd.add_option("--samples", r.samples_path,
                 "write each window's scored tokens' NLL as JSON Lines to FILE (for `tokensieve compare`)");
  add_shard_option(cmd, r.shard, "windows");
}

void register_ppl(CLI::App& app) {
  auto opts = std::make_shared<PplOptions>();
  CLI::App* cmd = app.add_subcommand(
      "ppl", "perplexity of a text file or dataset (llama.cpp or sliding-window protocol)");
  add_ppl_options(*cmd, *opts);
  cmd->add_flag("--json", opts->json, "print one JSON object on stdout");
  cmd->callback([opts] { ppl(*opts); });
}

}  // namespace ts::cli
