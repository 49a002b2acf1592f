#pragma once
// The statistics behind OrthoRank's observations (paper 000, Section 2, Figures 2, 3 and 12), on
// the normalized hidden states h̄ = RMSNorm_attn(h) (gain included) that every layer's attention reads:
//   sink_cos   cos(h̄_0^l, h̄_i^l) per layer l and token i >= 1   (Fig. 2: tokens align with the sink as depth
//   grows) norm       ||h̄_i^l|| per layer and token                      (Fig. 12: non-sink norms are about
//   equal) layer_cos  cos(h̄_p^l1, h̄_p^l2) per layer pair, for chosen positions p (Fig. 3: the sink is static,
//   others move)
#include <cstdint>
#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "runtime/transformer.h"

namespace ts {

struct SinkStates {
  size_t n_layers = 0, n_tok = 0, dim = 0;
  std::vector<float> normed;  // [layer][token][dim]

  std::span<const float> at(size_t layer, size_t token) const {
    return {normed.data() + (layer * n_tok + token) * dim, dim};
  }
};

// Runs `tokens` through `tf` (dense, from position 0) as one call and keeps h̄ of every token at
// every layer. on_layer(l) is called as layer l is reached.
SinkStates record_normed_states(Transformer& tf, std::span<const int32_t> tokens,
                                const std::function<void(size_t)>& on_layer);

double cosine(std::span<const float> a, std::span<const float> b);
double l2_norm(std::span<const float> a);

// One CSV (header: stat,position,token,newline,layer,layer2,value) with the three statistics;
// token_texts[i] is token i's text, `newline` flags the tokens holding a line break (the paper
// leaves them out of its figures), layer_cos covers `positions` (those < n_tok).
void write_sink_csv(std::ostream& out, const SinkStates& s, std::span<const std::string> token_texts,
                    std::span<const size_t> positions);

}  // namespace ts
