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
#include "runtime/transformer.h"

namespace ts::cli {

struct TaskSelection {
  std::string data_dir;
  size_t limit = 0;  // 0 = all
  std::optional<uint64_t> seed;
  RetrievalGrid grid;  // needle and kv_retrieval; its seed is the generated tasks' seed
};

class TaskRun {
 public:
  virtual ~TaskRun() = default;
  const std::string& name() const { return name_; }
  // Tokenizes the examples for a context of at most n_ctx tokens; returns the longest model input
  // (a generated answer included), at most n_ctx for tasks that truncate.
  virtual size_t prepare(const Tokenizer& tok, size_t n_ctx) = 0;
  // samples: where to write one JSON line per example, or null.
  virtual void run(Transformer& tf, const Tokenizer& tok, std::ofstream* samples) = 0;
  // The --json object of the task.
  virtual nlohmann::ordered_json metrics() const = 0;
  // The table row after the task name and n, and any indented detail lines.
  virtual std::string summary() const = 0;
  virtual size_t n() const = 0;

 protected:
  explicit TaskRun(std::string name) : name_(std::move(name)) {}
  std::string name_;
};

// Every task name `eval --task` accepts, in the order of its help text.
std::vector<std::string> eval_task_names();
// Reads the task's data files, so that a bad file fails before the model is loaded. (The needle
// task sizes its prompts with the tokenizer, so it builds them in prepare().)
std::unique_ptr<TaskRun> load_task_run(const std::string& name, const TaskSelection& sel);

}  // namespace ts::cli
