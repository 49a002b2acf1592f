#pragma once
// The layer searches of the layer-pruning papers, over any change applied to a set of layers
// (SLEB and Shortened LLaMA remove them; OrthoRank converts them to token-selecting layers):
//   iterative  SLEB (Song et al. 2024): greedy, each round adds the candidate whose change, on top
//              of the layers already chosen, gives the lowest calibration loss;
//   one-shot   Shortened LLaMA (Kim et al. 2024), PPL criterion: each candidate is changed alone
//              and the `count` with the lowest loss are taken together.
// Ties go to the lower layer index, so a search is as deterministic as its loss.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace ts {

enum class LayerSearchMethod { Iterative, OneShot };

// Calibration loss (lower is better) of the model with `layers` (ascending) changed.
using LayerSetLoss = std::function<double(const std::vector<uint32_t>& layers)>;

struct LayerTrial {
  std::vector<uint32_t> layers;  // the set evaluated
  double loss = 0;
};

struct LayerSearchResult {
  std::vector<uint32_t> layers;  // chosen, ascending
  std::vector<uint32_t> order;   // chosen, in the order the search took them (one-shot: by loss)
  std::vector<LayerTrial> trials;
};

// Loss evaluations a search makes (for progress bars).
size_t layer_search_evaluations(LayerSearchMethod method, size_t n_candidates, size_t count);

// Chooses `count` of `candidates` (count <= candidates.size()); `loss` is called once per trial.
LayerSearchResult search_layers(LayerSearchMethod method, std::span<const uint32_t> candidates, size_t count,
                                const LayerSetLoss& loss);

// Layers to change for a token-layer sparsity: each changed layer skips the computation of a
// fraction (1 - kept_fraction) of its tokens (removal: kept_fraction 0; OrthoRank: its ratio), so
// round(sparsity * n_layers / (1 - kept_fraction)).
size_t layers_for_sparsity(double sparsity, size_t n_layers, double kept_fraction);

}  // namespace ts
