#pragma once
// Next-token sampling: repetition penalty -> top-k -> top-p -> min-p -> temperature -> draw,
// the order llama.cpp's default chain uses. Temperature 0 is greedy (argmax).
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace ts {

struct SamplerParams {
  float temperature = 0.8f;
  int top_k = 40;               // 0 = off
  float top_p = 0.95f;          // 1 = off
  float min_p = 0.05f;          // 0 = off
  float repeat_penalty = 1.0f;  // 1 = off; divides positive logits, multiplies negative ones
  int repeat_last_n = 64;       // how many recent tokens the penalty looks at
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& params);
  // `history` is every token so far (prompt + generated); only its tail is penalised.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

 private:
  struct Candidate {
    int32_t id;
    float logit;
    float p = 0;  // probability at temperature 1, when a cut needs it
  };
  double uniform();  // [0, 1), identical on every platform for a given seed
  // Larger logit first; ties to the lower id.
  static bool before(const Candidate& a, const Candidate& b) {
    return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
  }
  // The top-p and min-p cuts of the first n candidates; how many stay, the largest first.
  size_t cut(size_t n);

  SamplerParams params_;
  std::mt19937_64 rng_;
  std::vector<Candidate> cands_;
  std::vector<float> probs_;  // reused across calls
};

}  // namespace ts
