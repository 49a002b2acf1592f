// tokensieve analyze: measurements of a model's internals behind the token-selection papers.
//   analyze sink  OrthoRank's observations (paper 000, Figs. 2, 3, 12) as CSV for tools/plot.py sink
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "core/error.h"
#include "core/progress.h"
#include "eval/sink_analysis.h"

namespace ts::cli {
namespace {

struct SinkOptions {
  ModelOptions model;
  std::string file, output;
  size_t n_tokens = 101;  // the paper's input: the first 101 tokens of WikiText-2
  std::vector<size_t> positions{0, 50, 100};
  bool json = false;
};

void analyze_sink(const SinkOptions& o) {
  auto model = Model::load(o.model.model_path);
  const Tokenizer& tok = model->tokenizer();
  std::vector<int32_t> tokens = tok.encode(read_text_file(o.file), tok.add_bos_default(), false);
  if (tokens.size() > o.n_tokens) tokens.resize(o.n_tokens);
  TS_CHECK(tokens.size() >= 2, o.file, ": fewer than 2 tokens, nothing to compare with the sink");
  std::vector<std::string> texts;
  for (int32_t t : tokens) texts.push_back(tok.decode({t}, true));

  ThreadPool pool(o.model.threads);
  Transformer tf(*model, pool, tokens.size(), o.model.precision());
  Progress progress("analyze sink", model->config().n_layers);
  const SinkStates s = record_normed_states(tf, tokens, [&](size_t l) { progress.update(l + 1); });
  progress.finish();
  std::ofstream csv(o.output, std::ios::trunc);
  TS_CHECK(csv, o.output, ": cannot write");
  write_sink_csv(csv, s, texts, o.positions);
  csv.close();
  TS_CHECK(csv, o.output, ": cannot write");

  // Per layer: mean cosine of the non-sink, non-newline tokens with the sink (Fig. 2's curves),
  // and the sink's cosine with its own state at the last layer (Fig. 3's last column).
  std::vector<double> mean_sink_cos, sink_vs_last, mean_token_vs_last;
  for (size_t l = 0; l < s.n_layers; ++l) {
    double sum = 0, sum_last = 0;
    size_t n = 0;
    for (size_t i = 1; i < s.n_tok; ++i) {
      if (texts[i].find('\n') != std::string::npos) continue;
      sum += cosine(s.at(l, 0), s.at(l, i));
      sum_last += cosine(s.at(l, i), s.at(s.n_layers - 1, i));
      ++n;
    }
    mean_sink_cos.push_back(n ? sum / double(n) : 0.0);
    mean_token_vs_last.push_back(n ? sum_last / double(n) : 0.0);
    sink_vs_last.push_back(cosine(s.at(l, 0), s.at(s.n_layers - 1, 0)));
  }
  if (o.json) {
    const nlohmann::ordered_json j = {{"model", o.model.model_path},
                                      {"file", o.file},
                                      {"tokens", s.n_tok},
                                      {"layers", s.n_layers},
                                      {"csv", o.output},
                                      {"mean_sink_cos", mean_sink_cos},
                                      {"sink_cos_with_last_layer", sink_vs_last},
                                      {"token_cos_with_last_layer", mean_token_vs_last}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf(
      "%zu tokens, %zu layers -> %s\n| layer | mean cos(sink, token) | cos(sink, sink@last) | mean "
      "cos(token, token@last) |\n|---|---|---|---|\n",
      s.n_tok, s.n_layers, o.output.c_str());
  for (size_t l = 0; l < s.n_layers; ++l)
    std::printf("| %zu | %.3f | %.3f | %.3f |\n", l, mean_sink_cos[l], sink_vs_last[l],
                mean_token_vs_last[l]);
}

}  // namespace

void register_analyze(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("analyze", "measurements of a model's internals");
  cmd->require_subcommand(1);
  auto sink = std::make_shared<SinkOptions>();
  CLI::App* s = cmd->add_subcommand(
      "sink",
      "OrthoRank's sink statistics (cosine to the sink per layer, layer-by-layer self-similarity, "
      "norms) of normalized hidden states, as CSV");
  add_model_options(*s, sink->model, false);
  s->add_option("-f,--file", sink->file, "text file (the paper: WikiText-2 test)")->required();
  s->add_option("-n,--n-tokens", sink->n_tokens, "tokens of the text to use (default 101, the paper's)")
      ->check(CLI::Range(2, 1 << 16));
  s->add_option("--positions", sink->positions, "positions whose layer-by-layer similarity is written")
      ->delimiter(',');
  s->add_option("-o,--output", sink->output, "CSV to write")->required();
  s->add_flag("--json", sink->json, "print one JSON object on stdout");
  s->callback([sink] { analyze_sink(*sink); });
}

}  // namespace ts::cli
