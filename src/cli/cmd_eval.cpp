// tokensieve eval: zero-shot multiple-choice tasks scored as lm-evaluation-harness scores them
// (log-likelihood of each choice's continuation given its context; acc, acc_norm, stderr).
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/cli_common.h"
#include "core/error.h"
#include "core/progress.h"
#include "eval/loglikelihood.h"
#include "eval/mc_metrics.h"
#include "eval/mc_tasks.h"
#include "eval/subset.h"

namespace ts::cli {
namespace {

struct EvalOptions {
  ModelOptions model;
  std::vector<std::string> tasks;
  std::string data_dir;
  size_t limit = 0;  // 0 = all
  std::optional<uint64_t> seed;
  bool json = false;
  std::string samples_path;  // per-example log-likelihoods as JSON Lines; "" = none
};

struct TaskRun {
  std::string name;
  std::vector<size_t> indices;  // of the examples in the task's file order
  std::vector<McExample> examples;
  std::vector<std::vector<TokenizedPair>> requests;  // [example][choice]
  McMetrics metrics;
};

// Loads every task first, so a bad data file fails before any model work.
std::vector<TaskRun> load_tasks(const EvalOptions& o) {
  std::vector<TaskRun> runs;
  for (const std::string& name : o.tasks) {
    std::vector<McExample> all = find_mc_task(name).load(o.data_dir);
    TaskRun run{name, select_examples(all.size(), o.limit, o.seed), {}, {}, {}};
    for (const size_t i : run.indices) run.examples.push_back(std::move(all[i]));
    runs.push_back(std::move(run));
  }
  return runs;
}

// Tokenizes every request; returns the longest model input (all tokens but the last).
size_t tokenize(const Tokenizer& tok, std::vector<TaskRun>& runs) {
  size_t longest = 0;
  for (TaskRun& run : runs) {
    for (size_t e = 0; e < run.examples.size(); ++e) {
      std::vector<TokenizedPair>& pairs = run.requests.emplace_back();
      for (const McChoice& c : run.examples[e].choices) {
        try {
          pairs.push_back(encode_pair(tok, c.context, c.continuation));
        } catch (const Error& err) {
          fail(run.name, " example ", e, ": ", err.what());
        }
        longest = std::max(longest, pairs.back().context.size() + pairs.back().continuation.size() - 1);
      }
    }
  }
  return longest;
}

// samples: where to write each example's log-likelihoods, or null.
void score(LoglikelihoodScorer& scorer, TaskRun& run, std::ofstream* samples) {
  McAccumulator acc;
  Progress progress(run.name, run.examples.size());
  for (size_t e = 0; e < run.examples.size(); ++e) {
    std::vector<double> lls;
    for (const TokenizedPair& pair : run.requests[e]) lls.push_back(scorer.score(pair));
    const McOutcome outcome = judge(run.examples[e], lls);
    acc.add(outcome);
    if (samples) {
      nlohmann::json requests = nlohmann::json::array();
      for (const McChoice& c : run.examples[e].choices) requests.push_back({c.context, c.continuation});
      *samples << nlohmann::json{{"task", run.name},
                                 {"doc_id", run.indices[e]},
                                 {"requests", requests},
                                 {"lls", lls},
                                 {"gold", run.examples[e].gold},
                                 {"acc", outcome.correct},
                                 {"acc_norm", outcome.correct_norm}}
                      .dump()
               << '\n';
    }
    progress.update(e + 1, cat("acc ", acc.metrics().acc));
  }
  progress.finish();
  run.metrics = acc.metrics();
}

void print_results(const std::vector<TaskRun>& runs, const Transformer& tf, bool json) {
  if (json) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();  // tasks in the order given
    for (const TaskRun& r : runs) {
      j[r.name] = {{"acc", r.metrics.acc},
                   {"acc_norm", r.metrics.acc_norm},
                   {"acc_stderr", r.metrics.acc_stderr},
                   {"n", r.metrics.n}};
    }
    if (tf.policies()) j["sparsity"] = policy_sparsity(tf);
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("%-14s %6s  %-17s %s\n", "task", "n", "acc +/- stderr", "acc_norm");
  for (const TaskRun& r : runs) {
    std::printf("%-14s %6zu  %.4f +/- %.4f  %.4f\n", r.name.c_str(), r.metrics.n, r.metrics.acc,
                r.metrics.acc_stderr, r.metrics.acc_norm);
  }
  print_policy_sparsity(tf);
}

void eval(const EvalOptions& o) {
  std::vector<TaskRun> runs = load_tasks(o);
  auto model = Model::load(o.model.model_path);
  const size_t longest = tokenize(model->tokenizer(), runs);
  // The cache only needs the longest input; longer ones than the limit are left-truncated.
  const size_t limit = o.model.ctx ? o.model.ctx : model->config().n_ctx_train;
  EvalRuntime rt(o.model, *model, std::max<size_t>(1, std::min(longest, limit)));
  LoglikelihoodScorer scorer(rt.transformer());
  std::ofstream samples;
  if (!o.samples_path.empty()) {
    samples.open(o.samples_path);
    TS_CHECK(samples, o.samples_path, ": cannot create file");
  }
  for (TaskRun& run : runs) score(scorer, run, samples.is_open() ? &samples : nullptr);
  TS_CHECK(!samples.is_open() || samples.flush(), o.samples_path, ": write error");
  print_results(runs, rt.transformer(), o.json);
}

}  // namespace

void register_eval(CLI::App& app) {
  auto opts = std::make_shared<EvalOptions>();
  CLI::App* cmd =
      app.add_subcommand("eval", "zero-shot multiple-choice tasks, scored as lm-evaluation-harness");
  add_model_options(*cmd, opts->model, true);
  std::vector<std::string> names;
  for (const McTask& t : mc_tasks()) names.emplace_back(t.name);
  cmd->add_option("--task", opts->tasks, "task(s), repeated or comma-separated")
      ->required()
      ->delimiter(',')
      ->check(CLI::IsMember(names));
  add_data_dir_option(*cmd, opts->data_dir);
  cmd->add_option("--limit", opts->limit,
                  "run N examples per task: the first N, or a seeded sample with --seed");
  cmd->add_option("--seed", opts->seed, "with --limit: draw the N examples at random with this seed");
  cmd->add_option("--samples", opts->samples_path,
                  "write each example's requests and log-likelihoods to FILE (JSON Lines)");
  cmd->add_flag("--json", opts->json,
                R"(print one JSON object {"<task>": {"acc", "acc_norm", "acc_stderr", "n"}})");
  cmd->callback([opts] { eval(*opts); });
}

}  // namespace ts::cli
