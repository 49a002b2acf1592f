// Sweep grids: the spec file, cell order and commands, cache keys, headline metrics and the CSV.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "eval/sweep.h"

namespace ts {
namespace {

SweepSpec example_spec() {
  SweepSpec spec = parse_sweep_spec(nlohmann::json::parse(R"({
    "model": "m.gguf", "threads": 1, "tasks": ["piqa", "wikitext2"],
    "policies": [{"specs": []}, {"label": "or", "specs": ["orthorank:layers=1,ratio=0.5"], "sparsity": 0.25},
                 {"specs": ["a:x=1", "b:y=2"], "baseline": "or"}],
    "settings": [{"args": ["--limit", "10"]}]
  })"),
                                    "spec.json");
  complete_sweep_spec(spec);
  return spec;
}

TEST(EvalSweep, SpecLabelsAndInterleavedCellOrder) {
  const SweepSpec spec = example_spec();
  EXPECT_EQ(spec.policies[0].label, "dense");
  EXPECT_EQ(spec.policies[1].label, "or");
  EXPECT_EQ(spec.policies[2].label, "a:x=1 + b:y=2");
  EXPECT_EQ(spec.settings[0].label, "--limit 10");
  const auto cells = sweep_cells(spec);
  ASSERT_EQ(cells.size(), 6u);
  // The policies of one task run back to back.
  EXPECT_EQ(cells[0].task, "piqa");
  EXPECT_EQ(cells[2].task, "piqa");
  EXPECT_EQ(cells[2].policy, 2u);
  EXPECT_EQ(cells[3].task, "wikitext2");
  EXPECT_EQ(cells[3].policy, 0u);
}

TEST(EvalSweep, SpecErrorsNameTheFile) {
  const auto error_of = [](const char* text) {
    try {
      SweepSpec s = parse_sweep_spec(nlohmann::json::parse(text, nullptr, false), "g.json");
      complete_sweep_spec(s);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of("{oops"), "g.json: invalid JSON");
  EXPECT_EQ(error_of(R"({"model": "m", "tasks": "piqa"})"), "g.json: 'tasks' is not a list");
  EXPECT_EQ(error_of(R"({"model": "m", "tasks": ["piqa"], "policies": [{"specs": [1]}]})"),
            "g.json: 'specs' holds a non-string");
  EXPECT_EQ(error_of(R"({"model": "m", "tasks": ["piqa"], "policies": [{"sparsity": "x"}]})"),
            "g.json: 'sparsity' is not a number");
  EXPECT_EQ(error_of(R"({"tasks": ["piqa"]})"), "sweep: no model (-m or the spec's 'model')");
  EXPECT_EQ(error_of(R"({"model": "m", "tasks": ["piqa"], "policies": [{"label": "a", "baseline": "b"}]})"),
            "sweep: row 'a' has baseline 'b', which is not another row's label");
  EXPECT_EQ(error_of(R"({"model": "m", "tasks": ["piqa"], "policies": [{"label": "a", "baseline": "a"}]})"),
            "sweep: row 'a' has baseline 'a', which is not another row's label");
  EXPECT_EQ(error_of(R"({"model": "m", "tasks": ["piqa"],
                         "policies": [{"label": "a", "baseline": "b"}, {"label": "b"}, {"label": "b"}]})"),
            "sweep: row 'a' has baseline 'b', which names several rows");
}

// Each row is compared with its named baseline, else with the dense row; dense rows with none.
TEST(EvalSweep, BaselineRows) {
  const SweepSpec spec = example_spec();
  EXPECT_EQ(baseline_row(spec, 0), std::nullopt);
  EXPECT_EQ(baseline_row(spec, 1), 0u);
  EXPECT_EQ(baseline_row(spec, 2), 1u);
  SweepSpec no_dense = spec;
  no_dense.policies.erase(no_dense.policies.begin());
  no_dense.policies[1].baseline.clear();
  EXPECT_EQ(baseline_row(no_dense, 0), std::nullopt);
  EXPECT_EQ(baseline_row(no_dense, 1), std::nullopt);
}

TEST(EvalSweep, CommandsAndKeys) {
  const SweepSpec spec = example_spec();
  const auto cells = sweep_cells(spec);
  const auto eval_cmd = cell_command(spec, cells[1]);
  EXPECT_EQ(eval_cmd,
            (std::vector<std::string>{"eval", "--task", "piqa", "-m", "m.gguf", "--json", "-t", "1",
                                      "--policy", "orthorank:layers=1,ratio=0.5", "--limit", "10"}));
  const auto ppl_cmd = cell_command(spec, cells[5]);
  EXPECT_EQ(ppl_cmd[0], "ppl");
  EXPECT_EQ(ppl_cmd[2], "wikitext2");
  EXPECT_EQ(std::count(ppl_cmd.begin(), ppl_cmd.end(), "--policy"), 2);
  // Keys: 16 hex digits, stable, and different for any change of the command (incl. argument split).
  EXPECT_EQ(cell_key({"a", "b"}), cell_key({"a", "b"}));
  EXPECT_EQ(cell_key({"a", "b"}).size(), 16u);
  EXPECT_NE(cell_key({"a", "b"}), cell_key({"ab"}));
  EXPECT_NE(cell_key(eval_cmd), cell_key(cell_command(spec, cells[0])));
}

TEST(EvalSweep, HeadlineMetricOfEachKindOfTask) {
  const auto ppl = cell_metric("wikitext2", nlohmann::json::parse(R"({"ppl": 12.5, "ppl_stderr": 0.1,
                                                                      "tokens_scored": 1000})"));
  EXPECT_EQ(ppl.name, "ppl");
  EXPECT_EQ(ppl.value, 12.5);
  EXPECT_EQ(ppl.n, 1000);
  const auto mc = cell_metric("piqa", nlohmann::json::parse(R"({"piqa": {"acc": 0.6, "acc_norm": 0.7,
                                                                 "acc_stderr": 0.02, "n": 50}})"));
  EXPECT_EQ(mc.name, "acc");
  EXPECT_EQ(mc.value, 0.6);
  const auto gen = cell_metric("needle", nlohmann::json::parse(R"({"needle": {"metric": "exact_match",
                                                                  "score": 0.5, "stderr": 0.1, "n": 4}})"));
  EXPECT_EQ(gen.name, "exact_match");
  EXPECT_EQ(gen.n, 4);
  EXPECT_THROW(cell_metric("piqa", nlohmann::json::parse(R"({"boolq": {}})")), Error);
}

TEST(EvalSweep, CsvSpeedupSparsityAndPairedComparison) {
  const SweepSpec spec = example_spec();
  const auto cells = sweep_cells(spec);
  const CellMetric m{"acc", 0.5, 0.1, 10};
  const auto measured = nlohmann::json::parse(R"({"attention_fraction": 0.9, "ffn_fraction": 0.7,
                                                  "kv_fraction": 1.0})");
  SampleComparison paired{"piqa", "acc", {0.5, 0.6, 0.1, {0.02, 0.18}, 10}, true, {1, 2, 0.625}};
  const std::vector<SweepRow> rows = {{&cells[0], m, 4.0, nullptr, std::nullopt},
                                      {&cells[1], m, 2.0, measured, paired},
                                      {&cells[2], m, 8.0, measured, std::nullopt}};
  const std::string csv = sweep_csv(spec, rows);
  EXPECT_EQ(
      csv,
      "policy,sparsity,setting,task,metric,value,stderr,n,seconds,throughput,speedup,attention_fraction,"
      "ffn_fraction,kv_fraction,baseline,diff,diff_lo,diff_hi,mcnemar_p\n"
      "dense,0,--limit 10,piqa,acc,0.5,0.1,10,4,2.5,1,,,,,,,,\n"
      "or,0.25,--limit 10,piqa,acc,0.5,0.1,10,2,5,2,0.9,0.7,1,dense,0.1,0.02,0.18,0.625\n"
      "a:x=1 + b:y=2,0.3,--limit 10,piqa,acc,0.5,0.1,10,8,1.25,0.5,0.9,0.7,1,,,,,\n");
}

}  // namespace
}  // namespace ts
