// tokensieve compare: two runs' --samples files (ppl: one line per window; eval: one per
// document) paired unit by unit: each statistic on A and B, B - A with its paired bootstrap 95%
// interval, and for right/wrong outcomes McNemar's exact test. "B beats A by x (95% CI [l, u])"
// rests on this, not on two numbers side by side.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/cli_common.h"
#include "core/error.h"
#include "eval/paired_stats.h"

namespace ts::cli {
namespace {

struct CompareOptions {
  std::string a_path, b_path, metric;  // metric "" = acc if the records have it, else score
  size_t resamples = 10000;
  uint64_t seed = 1;
  bool json = false;
};

std::vector<nlohmann::json> read_samples(const std::string& path) {
  std::ifstream in(path);
  TS_CHECK(in, path, ": cannot open");
  std::vector<nlohmann::json> records;
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    TS_CHECK(j.is_object(), path, " line ", n, ": not a JSON object");
    records.push_back(std::move(j));
  }
  TS_CHECK(!records.empty(), path, ": no samples");
  return records;
}

bool is_ppl(const nlohmann::json& record) { return record.contains("nll_sum"); }

// A number of a record, with a one-line error naming the file and the unit.
double number(const nlohmann::json& record, const std::string& key, const std::string& where) {
  const auto it = record.find(key);
  TS_CHECK(it != record.end() && (it->is_number() || it->is_boolean()), where, ": no number \"", key, "\"");
  return it->is_boolean() ? double(it->get<bool>()) : it->get<double>();
}

// A unit number (window index): a whole number >= 0.
size_t index(const nlohmann::json& record, const std::string& key, const std::string& where) {
  const double v = number(record, key, where);
  TS_CHECK(v >= 0 && v == std::floor(v) && v < 1e15, where, ": \"", key, "\" is ", v, ", not a window index");
  return static_cast<size_t>(v);
}

struct Row {
  std::string name, metric;
  PairedComparison c;
  bool binary = false;
  McNemar mcnemar;
};

// ppl samples: the windows paired by index; each must have scored as many tokens in both runs.
Row compare_ppl(const CompareOptions& o, const std::vector<nlohmann::json>& a,
                const std::vector<nlohmann::json>& b) {
  const auto by_window = [&](const std::vector<nlohmann::json>& records, const std::string& path) {
    std::map<size_t, const nlohmann::json*> out;
    for (const nlohmann::json& r : records)
      TS_CHECK(out.emplace(index(r, "window", path), &r).second, path, ": window ", index(r, "window", path),
               " appears twice");
    return out;
  };
  const auto in_a = by_window(a, o.a_path), in_b = by_window(b, o.b_path);
  TS_CHECK(a.size() == b.size(), o.a_path, " has ", a.size(), " windows, ", o.b_path, " ", b.size());
  PairedGroup g;
  for (const auto& [w, ra] : in_a) {
    const nlohmann::json& r = *ra;
    const auto it = in_b.find(w);
    TS_CHECK(it != in_b.end(), o.b_path, " has no window ", w);
    const double tokens = number(r, "tokens", o.a_path);
    TS_CHECK(number(*it->second, "tokens", o.b_path) == tokens, "window ", w, " scored ", tokens,
             " tokens in ", o.a_path, " and ", number(*it->second, "tokens", o.b_path), " in ", o.b_path,
             " (not the same text and context)");
    g.a.push_back(number(r, "nll_sum", o.a_path));
    g.b.push_back(number(*it->second, "nll_sum", o.b_path));
    g.weight.push_back(tokens);
  }
  return {"perplexity",
          "perplexity",
          paired_bootstrap({g}, PairedStatistic::Perplexity, o.resamples, o.seed),
          false,
          {}};
}

// eval samples: the documents paired by (task, doc_id); one row per task, then their average.
// Without --metric each task is compared on acc if its records have it (multiple choice, coref),
// else on score (generation tasks).
std::vector<Row> compare_eval(const CompareOptions& o, const std::vector<nlohmann::json>& a,
                              const std::vector<nlohmann::json>& b) {
  using Key = std::pair<std::string, std::string>;
  const auto by_doc = [](const std::vector<nlohmann::json>& records, const std::string& path) {
    std::map<Key, const nlohmann::json*> out;
    for (const nlohmann::json& r : records) {
      TS_CHECK(r.contains("task") && r["task"].is_string() && r.contains("doc_id"), path,
               ": a record without \"task\" and \"doc_id\" (not an eval --samples file)");
      const Key k{r["task"].get<std::string>(), r["doc_id"].dump()};
      TS_CHECK(out.emplace(k, &r).second, path, ": ", k.first, " document ", k.second, " appears twice");
    }
    return out;
  };
  const auto in_a = by_doc(a, o.a_path), in_b = by_doc(b, o.b_path);
  TS_CHECK(a.size() == b.size(), o.a_path, " has ", a.size(), " documents, ", o.b_path, " ", b.size());
  std::map<std::string, std::pair<std::string, PairedGroup>> tasks;  // task -> (metric, values)
  for (const auto& [k, ra] : in_a) {
    const auto it = in_b.find(k);
    TS_CHECK(it != in_b.end(), o.b_path, " has no ", k.first, " document ", k.second);
    auto& [metric, g] = tasks[k.first];
    if (metric.empty()) metric = !o.metric.empty() ? o.metric : ra->contains("acc") ? "acc" : "score";
    const std::string where = cat(k.first, " document ", k.second);
    g.a.push_back(number(*ra, metric, cat(o.a_path, ": ", where)));
    g.b.push_back(number(*it->second, metric, cat(o.b_path, ": ", where)));
  }
  const auto zero_one = [](const std::vector<double>& v) {
    return std::all_of(v.begin(), v.end(), [](double x) { return x == 0.0 || x == 1.0; });
  };
  std::vector<Row> rows;
  std::vector<PairedGroup> all;
  std::set<std::string> metrics;
  for (const auto& [name, task] : tasks) {
    const auto& [metric, g] = task;
    Row row{name, metric, paired_bootstrap({g}, PairedStatistic::Mean, o.resamples, o.seed), false, {}};
    row.binary = zero_one(g.a) && zero_one(g.b);
    if (row.binary) row.mcnemar = mcnemar_exact(g.a, g.b);
    rows.push_back(row);
    all.push_back(g);
    metrics.insert(metric);
  }
  if (tasks.size() > 1) {  // the mean of the task means, resampled within each task
    Row avg{"average",
            metrics.size() == 1 ? *metrics.begin() : "mixed",
            paired_bootstrap(all, PairedStatistic::Mean, o.resamples, o.seed),
            false,
            {}};
    avg.binary = std::all_of(rows.begin(), rows.end(), [](const Row& r) { return r.binary; });
    if (avg.binary) {  // McNemar over every document pooled (the average itself weighs tasks equally)
      std::vector<double> pa, pb;
      for (const PairedGroup& g : all) {
        pa.insert(pa.end(), g.a.begin(), g.a.end());
        pb.insert(pb.end(), g.b.begin(), g.b.end());
      }
      avg.mcnemar = mcnemar_exact(pa, pb);
    }
    rows.push_back(avg);
  }
  return rows;
}

void compare(const CompareOptions& o) {
  const std::vector<nlohmann::json> a = read_samples(o.a_path), b = read_samples(o.b_path);
  TS_CHECK(is_ppl(a.front()) == is_ppl(b.front()), o.a_path, " and ", o.b_path,
           " are not the same kind of samples (ppl windows vs eval documents)");
  const bool ppl = is_ppl(a.front());
  TS_CHECK(!ppl || o.metric.empty(), "--metric is for eval samples; ppl samples compare perplexity");
  const std::vector<Row> rows = ppl ? std::vector<Row>{compare_ppl(o, a, b)} : compare_eval(o, a, b);
  if (o.json) {
    nlohmann::json out = {{"a", o.a_path},
                          {"b", o.b_path},
                          {"metric", rows.back().metric},
                          {"resamples", o.resamples},
                          {"seed", o.seed},
                          {"rows", nlohmann::json::array()}};
    for (const Row& r : rows) {
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
              o.a_path.c_str(), o.b_path.c_str(), ppl ? "windows" : "documents", o.resamples,
              ppl ? "" : "; average: the mean of the task means (McNemar over all documents pooled)");
  std::printf(
      "| %s | metric | units | A | B | B - A | 95%% CI | right only in A / only in B | McNemar p |\n"
      "|---|---|---|---|---|---|---|---|---|\n",
      ppl ? "" : "task");
  for (const Row& r : rows) {
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
  cmd->add_option("--metric", opts->metric,
                  "eval samples: the per-document field compared (default: acc, else score)");
  cmd->add_option("--resamples", opts->resamples, "bootstrap resamples (default 10000)")
      ->check(CLI::Range(100, 10000000));
  cmd->add_option("--seed", opts->seed, "bootstrap seed (default 1)");
  cmd->add_flag("--json", opts->json, "print one JSON object on stdout");
  cmd->callback([opts] { compare(*opts); });
}

}  // namespace ts::cli
