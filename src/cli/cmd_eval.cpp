// tokensieve eval: zero-shot multiple-choice tasks scored as lm-evaluation-harness scores them
// (log-likelihood of each choice's continuation given its context; acc, acc_norm, stderr), and
// long-context tasks answered by greedy generation (LongBench multi_news, needle-in-a-haystack,
// key-value retrieval) or teacher-forced (TokenButler's synthetic co-reference task).
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/reports.h"
#include "core/error.h"

namespace ts::cli {
namespace {

struct EvalOptions : EvalRequest {
  bool json = false;
};

void eval(EvalOptions o) {
  std::vector<std::unique_ptr<TaskRun>> runs = load_eval_tasks(o);  // a bad data file fails first
  auto model = Model::load(o.model.model_path);
  const nlohmann::ordered_json j = eval_report(*model, o, runs);
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("%-14s %6s  %s\n", "task", "n", "score");
  for (const auto& r : runs) std::printf("%-14s %6zu  %s\n", r->name().c_str(), r->n(), r->summary().c_str());
  if (j.contains("sparsity")) print_sparsity(j["sparsity"]);
}

}  // namespace

std::vector<std::unique_ptr<TaskRun>> load_eval_tasks(EvalRequest& o) {
  o.selection.seed = o.seed;
  o.selection.grid.seed = o.seed.value_or(0);
  std::vector<std::unique_ptr<TaskRun>> runs;
  for (const std::string& name : o.tasks) runs.push_back(load_task_run(name, o.selection));
  return runs;
}

nlohmann::ordered_json eval_report(const Model& model, const EvalRequest& o,
                                   std::vector<std::unique_ptr<TaskRun>>& runs) {
  const size_t limit = o.model.ctx ? o.model.ctx : model.config().n_ctx_train;
  size_t longest = 0;
  for (auto& run : runs) longest = std::max(longest, run->prepare(model.tokenizer(), limit));
  // The cache only needs the longest input; longer multiple-choice inputs are left-truncated.
  EvalRuntime rt(o.model, model, std::max<size_t>(1, std::min(longest, limit)));
  std::ofstream samples;
  if (!o.samples_path.empty()) {
    samples.open(o.samples_path);
    TS_CHECK(samples, o.samples_path, ": cannot create file");
  }
  for (auto& run : runs)
    run->run(rt.transformer(), model.tokenizer(), o.shard, samples.is_open() ? &samples : nullptr);
  TS_CHECK(!samples.is_open() || samples.flush(), o.samples_path, ": write error");
  nlohmann::ordered_json j = nlohmann::ordered_json::object();  // tasks in the order given
  for (const auto& r : runs) j[r->name()] = r->metrics();
  if (rt.transformer().policies()) j["sparsity"] = policy_sparsity(rt.transformer());
  return j;
}

void add_eval_options(CLI::App& cmd, EvalRequest& r) {
  add_model_options(cmd, r.model, true);
  cmd.add_option("--task", r.tasks, "task(s), repeated or comma-separated")
      ->required()
      ->delimiter(',')
      ->check(CLI::IsMember(eval_task_names()));
  add_data_dir_option(cmd, r.selection.data_dir);
  cmd.add_option("--limit", r.selection.limit,
                 "run N examples per task: the first N, or a seeded sample with --seed");
  cmd.add_option("--seed", r.seed,
                 "with --limit: draw the N examples at random with this seed; also seeds the generated "
                 "tasks (needle, kv_retrieval, coref; default 0)");
  RetrievalGrid& grid = r.selection.grid;
  cmd.add_option("--lengths", grid.lengths, "needle: prompt + answer lengths in tokens")
      ->delimiter(',')
      ->check(CLI::Range(64, 1 << 20));
  cmd.add_option("--depths", grid.depths, "needle, kv_retrieval: where the answer sits, 0 (start) to 1 (end)")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 1.0));
  cmd.add_option("--kv-pairs", grid.kv_pairs, "kv_retrieval: key-value pairs in the JSON object")
      ->delimiter(',')
      ->check(CLI::Range(1, 100000));
  cmd.add_option("--per-cell", grid.per_cell, "needle, kv_retrieval: examples per grid cell")
      ->check(CLI::Range(1, 100000));
  cmd.add_option("--samples", r.samples_path,
                 "write each example's requests and results to FILE (JSON Lines)");
  add_shard_option(cmd, r.shard, "examples of each task");
}

void register_eval(CLI::App& app) {
  auto opts = std::make_shared<EvalOptions>();
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "zero-shot multiple choice (lm-evaluation-harness), long-context and synthetic retrieval tasks");
  add_eval_options(*cmd, *opts);
  cmd->add_flag("--json", opts->json,
                R"(print one JSON object {"<task>": {metrics}}: multiple choice {"acc", "acc_norm", )"
                R"("acc_stderr", "n"}, generation {"metric", "score", "stderr", "n"[, "cells"]}, )"
                R"(coref {"acc", "coverage", "acc_stderr", "n"}; under --policy also "sparsity")");
  cmd->callback([opts] { eval(*opts); });
}

}  // namespace ts::cli
