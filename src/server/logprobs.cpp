#include "server/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ts::server {

TokenLogprob token_logprob(std::span<const float> logits, int32_t token, size_t n_top) {
  const double mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (const float l : logits) sum += std::exp(double(l) - mx);
  // Summed as eval's token_log_prob sums, so both give the same bits.
  const double log_sum = std::log(sum);
  const auto logprob = [&](int32_t id) { return double(logits[size_t(id)]) - mx - log_sum; };
  TokenLogprob out{token, logprob(token), {}};
  n_top = std::min(n_top, logits.size());
  if (n_top == 0) return out;
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n_top), ids.end(),
                    [&](int32_t a, int32_t b) {
                      const float la = logits[size_t(a)], lb = logits[size_t(b)];
                      return la != lb ? la > lb : a < b;
                    });
  for (size_t i = 0; i < n_top; ++i) out.top.emplace_back(ids[i], logprob(ids[i]));
  return out;
}

}  // namespace ts::server
