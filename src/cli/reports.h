#pragma once
// The reports of `info`, `ppl` and `eval` as functions of a loaded model: the commands print them
// (--json), the Python bindings return them as dicts. One implementation, so both give the same
// numbers for the same request.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/eval_runs.h"
#include "eval/ppl_datasets.h"

namespace ts::cli {

// What `info --json` prints; `policies` may set the KV format counted.
nlohmann::json info_report(const Model& model, const std::string& path,
                           const std::vector<std::string>& policies);

struct PplRequest {
  ModelOptions model;
  std::string file, dataset, data_dir, protocol;  // protocol "" = the dataset's default
  size_t stride = 0;                              // 0 = CTX
  size_t chunks = 0;                              // 0 = all
  Shard shard;                                    // the part of the windows scored
  std::string samples_path;                       // per-window records as JSON Lines; "" = none
};
// The flags of `ppl` into a request (the subcommand and a sweep cell's command parse the same).
void add_ppl_options(CLI::App& cmd, PplRequest& r);
// Checks the request's flag combinations (CLI::ParseError: a usage error) and names its protocol.
std::string ppl_protocol(const PplRequest& r);
// Perplexity of `corpus` under the request; print_windows: the running "[i]ppl," line on stdout.
nlohmann::json ppl_report(const Model& model, const PplRequest& r, const PplCorpus& corpus,
                          bool print_windows);

struct EvalRequest {
  ModelOptions model;
  std::vector<std::string> tasks;
  TaskSelection selection;
  std::optional<uint64_t> seed;
  Shard shard;               // the part of each task's examples run
  std::string samples_path;  // per-example records as JSON Lines; "" = none
};
// The flags of `eval` into a request.
void add_eval_options(CLI::App& cmd, EvalRequest& r);
// The tasks' data read and checked (before a model is needed).
std::vector<std::unique_ptr<TaskRun>> load_eval_tasks(EvalRequest& r);
// Runs the loaded tasks: {"<task>": metrics, ..., "sparsity": ...} as `eval --json` prints it.
nlohmann::ordered_json eval_report(const Model& model, const EvalRequest& r,
                                   std::vector<std::unique_ptr<TaskRun>>& runs);

}  // namespace ts::cli
