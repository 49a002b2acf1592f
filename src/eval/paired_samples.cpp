#include "eval/paired_samples.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include "core/error.h"

namespace ts {
namespace {

struct Paths {
  const std::string& a_path;
  const std::string& b_path;
};

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

// ppl samples: the windows paired by index; each must have scored as many tokens in both runs.
SampleComparison compare_ppl(const Paths& o, const SampleCompareOptions& options,
                             const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b) {
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
          paired_bootstrap({g}, PairedStatistic::Perplexity, options.resamples, options.seed),
          false,
          {}};
}

// eval samples: the documents paired by (task, doc_id); one row per task, then their average.
// Without --metric each task is compared on acc if its records have it (multiple choice, coref),
// else on score (generation tasks).
std::vector<SampleComparison> compare_eval(const Paths& o, const SampleCompareOptions& options,
                                           const std::vector<nlohmann::json>& a,
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
    if (metric.empty())
      metric = !options.metric.empty() ? options.metric : ra->contains("acc") ? "acc" : "score";
    const std::string where = cat(k.first, " document ", k.second);
    g.a.push_back(number(*ra, metric, cat(o.a_path, ": ", where)));
    g.b.push_back(number(*it->second, metric, cat(o.b_path, ": ", where)));
  }
  const auto zero_one = [](const std::vector<double>& v) {
    return std::all_of(v.begin(), v.end(), [](double x) { return x == 0.0 || x == 1.0; });
  };
  std::vector<SampleComparison> rows;
  std::vector<PairedGroup> all;
  std::set<std::string> metrics;
  for (const auto& [name, task] : tasks) {
    const auto& [metric, g] = task;
    SampleComparison row{name,
                         metric,
                         paired_bootstrap({g}, PairedStatistic::Mean, options.resamples, options.seed),
                         false,
                         {}};
    row.binary = zero_one(g.a) && zero_one(g.b);
    if (row.binary) row.mcnemar = mcnemar_exact(g.a, g.b);
    rows.push_back(row);
    all.push_back(g);
    metrics.insert(metric);
  }
  if (tasks.size() > 1) {  // the mean of the task means, resampled within each task
    SampleComparison avg{"average",
                         metrics.size() == 1 ? *metrics.begin() : "mixed",
                         paired_bootstrap(all, PairedStatistic::Mean, options.resamples, options.seed),
                         false,
                         {}};
    avg.binary = std::all_of(rows.begin(), rows.end(), [](const SampleComparison& r) { return r.binary; });
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

}  // namespace

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

bool is_ppl_sample(const nlohmann::json& record) { return record.contains("nll_sum"); }

std::vector<SampleComparison> compare_samples(const std::string& a_path, const std::string& b_path,
                                              const SampleCompareOptions& options) {
  const std::vector<nlohmann::json> a = read_samples(a_path), b = read_samples(b_path);
  TS_CHECK(is_ppl_sample(a.front()) == is_ppl_sample(b.front()), a_path, " and ", b_path,
           " are not the same kind of samples (ppl windows vs eval documents)");
  const Paths paths{a_path, b_path};
  if (!is_ppl_sample(a.front())) return compare_eval(paths, options, a, b);
  TS_CHECK(options.metric.empty(), "--metric is for eval samples; ppl samples compare perplexity");
  return {compare_ppl(paths, options, a, b)};
}

}  // namespace ts
