#include "server/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ts::server {

TokenLogprob token_logprob(std::span<const float> logits, int32_t token, size_t n_top) {
  const double mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (const float l : logits) sum += std::exp(double(l) - mx);
  const double log_z = mx + std::log(sum);
  TokenLogprob out{token, double(logits[static_cast<size_t>(token)]) - log_z, {}};
  n_top = std::min(n_top, logits.size());
  if (n_top == 0) return out;
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n_top), ids.end(),
                    [&](int32_t a, int32_t b) {
                      const float la = logits[size_t(a)], lb = logits[size_t(b)];
                      return la != lb ? la > lb : a < b;
                    });
  for (size_t i = 0; i < n_top; ++i) out.top.emplace_back(ids[i], double(logits[size_t(ids[i])]) - log_z);
  return out;
}

}  // namespace ts::server
