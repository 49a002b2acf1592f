#pragma once
// `tokensieve sweep`: a grid of policies x settings x tasks. Each cell is one `tokensieve eval` or
// `tokensieve ppl` command; its JSON result is cached under a key made from the command line, so an
// interrupted sweep resumes where it stopped, and the grid's table is written as CSV. Each cell
// also keeps its per-window / per-document samples, so that every row is compared, paired, with
// its baseline row (dense unless the row names another): B - A with a bootstrap 95% interval.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "eval/paired_samples.h"

namespace ts {

struct SweepPolicy {
  std::string label;
  std::vector<std::string> specs;  // --policy specs, in order; none = dense
  std::optional<double> sparsity;  // the row's nominal sparsity, for the quality-vs-sparsity plot
  std::string baseline;            // the label of the row this one is compared with ("": the dense row)
};

struct SweepSetting {
  std::string label;
  std::vector<std::string> args;  // extra command-line arguments, e.g. {"--limit", "200"} or {"-c", "1024"}
};

struct SweepSpec {
  std::string model, data_dir;
  int threads = 0;                 // 0 = the commands' default (all cores)
  std::vector<std::string> tasks;  // eval task names, or wikitext2 / c4 for perplexity
  std::vector<SweepPolicy> policies;
  std::vector<SweepSetting> settings;
};

// The JSON spec file: {"model", "threads"?, "data_dir"?, "tasks": [...], "policies": [{"label"?,
// "specs": [...], "sparsity"?, "baseline"?}], "settings"?: [{"label"?, "args": [...]}]}. Errors name
// the file.
SweepSpec parse_sweep_spec(const nlohmann::json& j, const std::string& path);

// Row labels for rows given without one: "dense" for no policy, else the specs joined by " + ";
// settings: their arguments joined by spaces ("default" when none). Fills an empty settings list
// with one default setting and an empty policies list with dense. A baseline must name another row.
void complete_sweep_spec(SweepSpec& spec);

// The row a policy row is compared with: its baseline's, else the first dense row (none for dense
// rows themselves, or without one).
std::optional<size_t> baseline_row(const SweepSpec& spec, size_t policy);

struct SweepCell {
  size_t policy = 0, setting = 0;  // indices into the spec
  std::string task;
};

// Every cell: by setting, then task, then policy, so the policies of one (setting, task) run back
// to back and their timings see the same machine load (the speed comparison is interleaved).
std::vector<SweepCell> sweep_cells(const SweepSpec& spec);

bool is_perplexity_task(const std::string& task);

// The subcommand and arguments of a cell (without the program name), always with --json.
std::vector<std::string> cell_command(const SweepSpec& spec, const SweepCell& cell);

// 16 hex digits of FNV-1a 64 over the arguments (each NUL-terminated): the cache file's name.
std::string cell_key(const std::vector<std::string>& command);

// The cell's headline number from its command's JSON: perplexity for ppl, acc for multiple choice
// and coref, the task's score for generation tasks.
struct CellMetric {
  std::string name;
  double value = 0, stderr_value = 0;
  double n = 0;  // examples, or tokens scored for perplexity: the unit of throughput
};
CellMetric cell_metric(const std::string& task, const nlohmann::json& output);

struct SweepRow {
  const SweepCell* cell;
  CellMetric metric;
  double seconds = 0;
  // The command's "sparsity" object under policies ({"attention_fraction", "ffn_fraction",
  // "kv_fraction", ...}: shares of (token, layer) pairs that ran each step), else null.
  nlohmann::json measured;
  std::optional<SampleComparison>
      paired;  // this row (B) against its baseline row (A), when both have samples
};

// One line per row: policy,sparsity,setting,task,metric,value,stderr,n,seconds,throughput,speedup,
// attention_fraction,ffn_fraction,kv_fraction,baseline,diff,diff_lo,diff_hi,mcnemar_p. sparsity is the row's
// nominal value when it has one, 0 for dense, else the measured token-layer sparsity 1 - min(attention, FFN
// fraction) (policies that select keys rather than skip steps should state theirs). throughput = n / seconds;
// speedup = the dense row's seconds / seconds for the same setting and task (empty without a dense row);
// baseline..mcnemar_p: the paired comparison, B - A of the row's metric with its 95% interval
// (McNemar's p for right/wrong outcomes), empty without one.
std::string sweep_csv(const SweepSpec& spec, const std::vector<SweepRow>& rows);

}  // namespace ts
