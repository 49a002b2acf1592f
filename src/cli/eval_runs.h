#pragma once
// The tasks of `tokensieve eval`, one class per way of scoring: each is loaded (data files read,
// prompts built) before the model, tokenized once the tokenizer exists, then run on the forward pass.
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "eval/gen_tasks.h"
#include "eval/subset.h"
#include "runtime/transformer.h"

namespace ts::cli {

struct TaskSelection {
  std::string data_dir;
  size_t limit = 0;  // 0 = all
  std::optional<uint64_t> seed;
  RetrievalGrid grid;  // needle and kv_retrieval; its seed is the generated tasks' seed
};

// One task's examples. Each example is scored on its own (a fresh sequence: nothing carries over
// from the example before), so a shard of the examples gives the records the whole run gives for
// them, and tallying every shard's records in order gives the whole run's metrics bit for bit.
class TaskRun {
 public:
  virtual ~TaskRun() = default;
  const std::string& name() const { return name_; }
  // Tokenizes the examples for a context of at most n_ctx tokens; returns the longest model input
  // (a generated answer included), at most n_ctx for tasks that truncate. Every shard prepares
  // all the examples, so that each sizes the cache as the whole run does.
  virtual size_t prepare(const Tokenizer& tok, size_t n_ctx) = 0;
  // Scores the shard's examples, each one's record written to `samples` (when given) and tallied.
  void run(Transformer& tf, const Tokenizer& tok, const Shard& shard, std::ofstream* samples);
  // Adds one example's record, as run() writes it, to the metrics.
  void tally(const nlohmann::ordered_json& record) {
    add_record(record);
    ++tallied_;
  }
  // The --json object of the task.
  virtual nlohmann::ordered_json metrics() const = 0;
  // The table row after the task name and n, and any indented detail lines.
  virtual std::string summary() const = 0;
  size_t n() const { return tallied_; }  // examples tallied

 protected:
  explicit TaskRun(std::string name) : name_(std::move(name)) {}
  virtual size_t size() const = 0;  // examples selected
  // Example e (of the selected ones) scored: its record.
  virtual nlohmann::ordered_json score(Transformer& tf, const Tokenizer& tok, size_t e) = 0;
  virtual void add_record(const nlohmann::ordered_json& record) = 0;
  // The progress line's figure so far, e.g. "acc 0.52".
  virtual std::string running_score() const = 0;
  std::string name_;

 private:
  size_t tallied_ = 0;
};

// Every task name `eval --task` accepts, in the order of its help text.
std::vector<std::string> eval_task_names();
// Reads the task's data files, so that a bad file fails before the model is loaded. (The needle
// task sizes its prompts with the tokenizer, so it builds them in prepare().)
std::unique_ptr<TaskRun> load_task_run(const std::string& name, const TaskSelection& sel);

}  // namespace ts::cli
