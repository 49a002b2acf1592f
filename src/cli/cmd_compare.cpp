// tokensieve compare: two runs' --samples files (ppl: one line per window; eval: one per
// document) paired unit by unit: each statistic on A and B, B - A with its paired bootstrap 95%
// interval, and for right/wrong outcomes McNemar's exact test. "B beats A by x (95% CI [l, u])"
// rests on this, not on two numbers side by side.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "eval/paired_samples.h"

namespace ts::cli {
namespace {

struct CompareOptions {
  std::string a_path, b_path;
  SampleCompareOptions options;
  bool json = false;
};

void compare(const CompareOptions& o) {
  const std::vector<SampleComparison> rows = compare_samples(o.a_path, o.b_path, o.options);
  const bool ppl = rows.front().name == "perplexity";
  if (o.json) {
    nlohmann::json out = {{"a", o.a_path},
                          {"b", o.b_path},
                          {"metric", rows.back().metric},
                          {"resamples", o.options.resamples},
                          {"seed", o.options.seed},
                          {"rows", nlohmann::json::array()}};
    for (const SampleComparison& r : rows) {
      nlohmann::json j = {{"name", r.name},
                          {"metric", r.metric},
                          {"units", r.c.units},
                          {"a", r.c.a},
                          {"b", r.c.b},
                          {"diff", r.c.diff},
                          {"diff_ci95", {r.c.diff_ci.lo, r.c.diff_ci.hi}}};
      if (r.binary)
        j.update({{"a_only", r.mcnemar.a_only}, {"b_only", r.mcnemar.b_only}, {"mcnemar_p", r.mcnemar.p}});
      out["rows"].push_back(j);
    }
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  std::printf("A = %s\nB = %s\npaired over %s; 95%% intervals from %zu bootstrap resamples%s\n\n",
              o.a_path.c_str(), o.b_path.c_str(), ppl ? "windows" : "documents", o.options.resamples,
              ppl ? "" : "; average: the mean of the task means (McNemar over all documents pooled)");
  std::printf(
      "| %s | metric | units | A | B | B - A | 95%% CI | right only in A / only in B | McNemar p |\n"
      "|---|---|---|---|---|---|---|---|---|\n",
      ppl ? "" : "task");
  for (const SampleComparison& r : rows) {
    std::printf("| %s | %s | %zu | %.4f | %.4f | %+.4f | [%+.4f, %+.4f] |", r.name.c_str(), r.metric.c_str(),
                r.c.units, r.c.a, r.c.b, r.c.diff, r.c.diff_ci.lo, r.c.diff_ci.hi);
    if (r.binary)
      std::printf(" %zu / %zu | %.3g |\n", r.mcnemar.a_only, r.mcnemar.b_only, r.mcnemar.p);
    else
      std::printf(" – | – |\n");
  }
}

}  // namespace

void register_compare(CLI::App& app) {
  auto opts = std::make_shared<CompareOptions>();
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "two runs' --samples files (ppl or eval) paired: B - A with a bootstrap 95% CI, McNemar's test");
  cmd->add_option("A", opts->a_path, "samples of run A (the baseline)")->required();
  cmd->add_option("B", opts->b_path, "samples of run B")->required();
  cmd->add_option("--metric", opts->options.metric,
                  "eval samples: the per-document field compared (default: acc, else score)");
  cmd->add_option("--resamples", opts->options.resamples, "bootstrap resamples (default 10000)")
      ->check(CLI::Range(100, 10000000));
  cmd->add_option("--seed", opts->options.seed, "bootstrap seed (default 1)");
  cmd->add_flag("--json", opts->json, "print one JSON object on stdout");
  cmd->callback([opts] { compare(*opts); });
}

}  // namespace ts::cli
