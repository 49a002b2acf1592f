#pragma once
// Log-probabilities of tokens and their most likely alternatives, for OpenAI's `logprobs`.
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace ts::server {

struct TokenLogprob {
  int32_t id = 0;
  std::optional<double> logprob;                // none for a prompt's first token (no context)
  std::vector<std::pair<int32_t, double>> top;  // the n_top likeliest tokens, most likely first
};

// log softmax(logits)[token] in double precision, with the n_top likeliest tokens.
TokenLogprob token_logprob(std::span<const float> logits, int32_t token, size_t n_top);

}  // namespace ts::server
