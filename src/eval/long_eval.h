#pragma once
// Running the generation and co-reference tasks on a transformer, one example at a time.
#include <string>

#include "eval/coref_task.h"
#include "eval/gen_tasks.h"

namespace ts {

// LongBench's middle truncation: a prompt of more than max_tokens tokens keeps its first and last
// max_tokens / 2, decoded back to text (pred.py: tokenizer.decode of each half, joined).
std::string middle_truncate(const Tokenizer& tok, const std::string& prompt, size_t max_tokens);

// The model input of an example: its prompt (middle-truncated to leave room for the answer when
// the example allows it) tokenized with the model's BOS setting. Throws when it does not fit n_ctx.
std::vector<int32_t> gen_prompt_tokens(const Tokenizer& tok, const GenExample& ex, size_t n_ctx);

struct GenRecord {
  std::string output;
  double score = 0;
  size_t prompt_tokens = 0;
};
GenRecord run_gen_example(Transformer& tf, const Tokenizer& tok, const GenExample& ex);

struct CorefRecord {
  bool correct = false;  // every token of the location predicted
  double coverage = 0;   // fraction of its tokens predicted
  size_t tokens = 0;
};
TokenizedPair coref_tokens(const Tokenizer& tok, const CorefExample& ex);
CorefRecord run_coref_example(Transformer& tf, const Tokenizer& tok, const CorefExample& ex);

// Mean and standard error of the mean of per-example scores (sample standard deviation, as
// lm-eval's stderr for acc).
class MeanAccumulator {
 public:
  void add(double x);
  size_t n() const { return n_; }
  double mean() const;
  double stderr_of_mean() const;  // 0 below two values

 private:
  size_t n_ = 0;
  double sum_ = 0, sum2_ = 0;
};

}  // namespace ts
