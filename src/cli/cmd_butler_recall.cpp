// tokensieve butler-recall: how well a TokenButler predictor ranks keys like the model's own
// attention: Recall@K% and the top-50% token-classification accuracy (policies/tokenbutler/
// butler_metrics.h) over non-overlapping windows of a text (default: WikiText-2 test).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "core/error.h"
#include "core/progress.h"
#include "eval/ppl_datasets.h"
#include "policies/tokenbutler/butler_file.h"
#include "policies/tokenbutler/butler_metrics.h"

namespace ts::cli {
namespace {

struct RecallOptions {
  ModelOptions model;
  std::string predictor, file, dataset = "wikitext2", data_dir;
  size_t ctx = 512, chunks = 8;
  bool json = false;
};

void butler_recall(const RecallOptions& o) {
  const PplCorpus corpus =
      o.file.empty() ? load_ppl_corpus(o.dataset, o.data_dir) : PplCorpus{o.file, read_text_file(o.file)};
  auto model = Model::load(o.model.model_path);
  const ButlerFile file = load_butler(o.predictor);
  const std::vector<int32_t> tokens = model->tokenizer().encode(corpus.text, false, false);
  const size_t windows = std::min(o.chunks, tokens.size() / o.ctx);
  TS_CHECK(windows > 0, "butler-recall: the text has fewer than ", o.ctx, " tokens");
  ThreadPool pool(o.model.threads);
  RecallMeter meter(*model, pool, file.weights, o.ctx);
  Progress progress("butler-recall", windows);
  for (size_t w = 0; w < windows; ++w) {
    meter.add(std::span(tokens).subspan(w * o.ctx, o.ctx));
    progress.update(w + 1);
  }
  progress.finish();
  const RecallReport r = meter.report();
  if (o.json) {
    nlohmann::json recall = nlohmann::json::object();
    for (size_t q = 0; q < r.percents.size(); ++q) recall[std::to_string(int(r.percents[q]))] = r.recall[q];
    const nlohmann::json j = {{"predictor", o.predictor},
                              {"windows", windows},
                              {"ctx", o.ctx},
                              {"recall", recall},
                              {"top50_accuracy", r.top50_accuracy}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  for (size_t q = 0; q < r.percents.size(); ++q)
    std::printf("Recall@%g%%: %.4f\n", r.percents[q], r.recall[q]);
  std::printf("top-50%% accuracy (last row): %.4f over %zu windows of %zu tokens\n", r.top50_accuracy,
              windows, o.ctx);
}

}  // namespace

void register_butler_recall(CLI::App& app) {
  auto opts = std::make_shared<RecallOptions>();
  CLI::App* cmd =
      app.add_subcommand("butler-recall", "Recall@K% and top-50% accuracy of a TokenButler predictor");
  add_model_options(*cmd, opts->model, /*runs_model=*/false);
  cmd->add_option("--predictor", opts->predictor, "predictor file (train-butler)")->required();
  cmd->add_option("-f,--file", opts->file, "text file instead of --dataset");
  cmd->add_option("--dataset", opts->dataset, "wikitext2 or c4");
  add_data_dir_option(*cmd, opts->data_dir);
  cmd->add_option("-c,--ctx", opts->ctx, "tokens per window")->check(CLI::Range(8, 8192));
  cmd->add_option("--chunks", opts->chunks, "windows to score")->check(CLI::Range(1, 1 << 20));
  cmd->add_flag("--json", opts->json, "one JSON object on stdout");
  cmd->callback([opts] { butler_recall(*opts); });
}

}  // namespace ts::cli
