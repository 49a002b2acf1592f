#pragma once
// Long-context tasks answered by greedy generation: LongBench multi_news (read from the data
// directory) and two generated retrieval tasks, needle-in-a-haystack and key-value retrieval.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "eval/generation.h"

namespace ts {

enum class GenMetric {
  RougeL,    // best ROUGE-L F over the references (LongBench's summarization score)
  Contains,  // 1 when a reference occurs in the output, else 0 (RULER's and Lost in the Middle's match)
};

struct GenExample {
  std::string prompt;
  std::vector<std::string> answers;
  GenerationLimits limits;
  GenMetric metric = GenMetric::Contains;
  // Prompts longer than the context lose their middle (LongBench); the generated tasks are built
  // to fit, so for them a prompt that does not fit is an error.
  bool truncate_middle = false;
  nlohmann::ordered_json cell;  // where the example sits in its task's grid, e.g. {"length", "depth"}
};

double score_generation(const GenExample& ex, std::string_view output);

// Python's str.format for a prompt template: each {name} replaced by fields[name], "{{" and "}}"
// by single braces; an unknown name or a lone brace is an error.
std::string format_prompt(std::string_view format, const nlohmann::json& fields);

// LongBench v1 multi_news: longbench/multi_news.jsonl with config/dataset2prompt.json's prompt and
// config/dataset2maxlen.json's generation length (512), scored by ROUGE-L.
std::vector<GenExample> load_multi_news(const std::string& data_dir);

// Counts a text's tokens as a model input (BOS included when the model adds it); the needle
// generator sizes prompts with it.
using TokenCounter = std::function<size_t(std::string_view)>;

struct RetrievalGrid {
  std::vector<size_t> lengths{1024, 2048, 4096, 8192};    // needle: prompt + answer budget in tokens
  std::vector<double> depths{0.0, 0.25, 0.5, 0.75, 1.0};  // where the needle / the asked pair sits
  std::vector<size_t> kv_pairs{25, 50, 100};              // key-value: pairs in the JSON object
  size_t per_cell = 1;                                    // examples per grid cell
  uint64_t seed = 0;
};

// Sentences of a haystack text (WikiText-2's wiki.test.raw: headings and blank lines dropped).
std::vector<std::string> haystack_sentences(std::string_view text);

// Needle in a haystack (RULER's single-needle template): a sentence "One of the special magic numbers
// for <key> is: <7 digits>." put at depth d of filler sentences (taken in order, cyclically, from a seeded
// start), so that prompt and answer fit `length` tokens; the answer is the number. Cells: length x depth.
std::vector<GenExample> make_needle_examples(const std::vector<std::string>& haystack,
                                             const RetrievalGrid& grid, const TokenCounter& count_tokens);

// Key-value retrieval (Lost in the Middle): a JSON object of random UUID pairs and one key whose
// value is asked for; the pair sits at depth d of the object. Cells: pairs x depth.
std::vector<GenExample> make_kv_examples(const RetrievalGrid& grid);

}  // namespace ts
