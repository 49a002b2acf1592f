#include "eval/long_eval.h"

#include <cmath>

#include "core/error.h"

namespace ts {

std::string middle_truncate(const Tokenizer& tok, const std::string& prompt, size_t max_tokens) {
  const std::vector<int32_t> tokens = tok.encode(prompt, false, true);
  if (tokens.size() <= max_tokens) return prompt;
  const auto half = static_cast<std::ptrdiff_t>(max_tokens / 2);
  return tok.decode({tokens.begin(), tokens.begin() + half}) +
         tok.decode({tokens.end() - half, tokens.end()});
}

std::vector<int32_t> gen_prompt_tokens(const Tokenizer& tok, const GenExample& ex, size_t n_ctx) {
  TS_CHECK(ex.limits.max_new_tokens < n_ctx, "a context of ", n_ctx, " tokens leaves no room for the prompt");
  const size_t budget = n_ctx - ex.limits.max_new_tokens;
  const std::string prompt = ex.truncate_middle ? middle_truncate(tok, ex.prompt, budget) : ex.prompt;
  std::vector<int32_t> tokens = tok.encode(prompt, tok.add_bos_default(), true);
  // Re-encoding the joined halves can add a token or two at the seam; the answer room absorbs it.
  TS_CHECK(tokens.size() < n_ctx, "a prompt of ", tokens.size(), " tokens does not fit the context of ",
           n_ctx, " (raise -c or make the task smaller)");
  return tokens;
}

GenRecord run_gen_example(Transformer& tf, const Tokenizer& tok, const GenExample& ex) {
  const std::vector<int32_t> prompt = gen_prompt_tokens(tok, ex, tf.n_ctx());
  GenRecord r;
  r.prompt_tokens = prompt.size();
  r.output = tok.decode(greedy_generate(tf, tok, prompt, ex.limits));
  r.score = score_generation(ex, r.output);
  return r;
}

TokenizedPair coref_tokens(const Tokenizer& tok, const CorefExample& ex) {
  return encode_pair(tok, ex.context, " " + ex.location);
}

CorefRecord run_coref_example(Transformer& tf, const Tokenizer& tok, const CorefExample& ex) {
  const std::vector<bool> hits = argmax_hits(tf, coref_tokens(tok, ex));
  size_t right = 0;
  for (const bool h : hits) right += h;
  return {right == hits.size(), double(right) / double(hits.size()), hits.size()};
}

void MeanAccumulator::add(double x) {
  ++n_;
  sum_ += x;
  sum2_ += x * x;
}

double MeanAccumulator::mean() const { return n_ ? sum_ / double(n_) : 0.0; }

double MeanAccumulator::stderr_of_mean() const {
  if (n_ < 2) return 0.0;
  const double m = mean(), var = std::max(0.0, (sum2_ - double(n_) * m * m) / double(n_ - 1));
  return std::sqrt(var / double(n_));
}

}  // namespace ts
