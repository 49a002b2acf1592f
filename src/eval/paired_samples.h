#pragma once
// Two runs' --samples files paired unit by unit (ppl: windows by index, each with the same number
// of tokens scored; eval: documents by (task, doc_id)): the statistic on A and B, B - A with its
// paired bootstrap 95% interval, and McNemar's exact test when the outcomes are right or wrong.
// `tokensieve compare` prints these rows; `tokensieve sweep` puts each row's against its baseline
// row in the CSV.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/paired_stats.h"

namespace ts {

struct SampleCompareOptions {
  std::string metric;  // eval samples: the field compared; "" = acc if the records have it, else score
  size_t resamples = 10000;
  uint64_t seed = 1;
};

struct SampleComparison {
  std::string name, metric;  // ppl: "perplexity"; eval: the task, or "average" over several
  PairedComparison c;
  bool binary = false;  // every value 0 or 1: mcnemar holds the exact test
  McNemar mcnemar;
};

// The records of a --samples file (JSON lines), with one-line errors naming the file and line.
std::vector<nlohmann::json> read_samples(const std::string& path);

// Whether a record is a ppl window (else an eval document).
bool is_ppl_sample(const nlohmann::json& record);

// B - A: one row for ppl samples; for eval samples one per task (in name order), then with several
// tasks their "average" (the mean of the task means, resampled within each task; McNemar over
// every document pooled).
std::vector<SampleComparison> compare_samples(const std::string& a_path, const std::string& b_path,
                                              const SampleCompareOptions& options);

}  // namespace ts
