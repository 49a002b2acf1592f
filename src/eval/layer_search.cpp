#include "eval/layer_search.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ts {
namespace {

std::vector<uint32_t> with_layer(std::vector<uint32_t> layers, uint32_t layer) {
  layers.insert(std::upper_bound(layers.begin(), layers.end(), layer), layer);
  return layers;
}

}  // namespace

size_t layer_search_evaluations(LayerSearchMethod method, size_t n_candidates, size_t count) {
  if (method == LayerSearchMethod::OneShot) return n_candidates;
  size_t n = 0;
  for (size_t round = 0; round < count; ++round) n += n_candidates - round;
  return n;
}

LayerSearchResult search_layers(LayerSearchMethod method, std::span<const uint32_t> candidates, size_t count,
                                const LayerSetLoss& loss) {
  TS_CHECK(count <= candidates.size(), "the search needs ", count, " layers but has only ", candidates.size(),
           " candidates");
  std::vector<uint32_t> pool(candidates.begin(), candidates.end());
  std::sort(pool.begin(), pool.end());
  pool.erase(std::unique(pool.begin(), pool.end()), pool.end());
  LayerSearchResult r;
  const auto trial = [&](std::vector<uint32_t> layers) {
    const double l = loss(layers);
    r.trials.push_back({std::move(layers), l});
    return l;
  };
  if (method == LayerSearchMethod::OneShot) {
    std::vector<std::pair<double, uint32_t>> ranked;
    for (uint32_t c : pool) ranked.emplace_back(trial({c}), c);
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < count; ++i) r.order.push_back(ranked[i].second);
  } else {
    for (size_t round = 0; round < count; ++round) {
      std::vector<uint32_t> chosen(r.order.begin(), r.order.end());
      std::sort(chosen.begin(), chosen.end());
      double best = INFINITY;
      size_t best_at = pool.size();
      for (size_t i = 0; i < pool.size(); ++i) {
        const double l = trial(with_layer(chosen, pool[i]));
        if (l < best || best_at == pool.size()) best = l, best_at = i;
      }
      r.order.push_back(pool[best_at]);
      pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(best_at));
    }
  }
  r.layers = r.order;
  std::sort(r.layers.begin(), r.layers.end());
  return r;
}

size_t layers_for_sparsity(double sparsity, size_t n_layers, double kept_fraction) {
  TS_CHECK(sparsity >= 0 && sparsity < 1, "the sparsity ", sparsity, " must be in [0, 1)");
  TS_CHECK(kept_fraction >= 0 && kept_fraction < 1, "the kept token fraction ", kept_fraction,
           " must be in [0, 1)");
  const auto n = static_cast<size_t>(std::lround(sparsity * double(n_layers) / (1.0 - kept_fraction)));
  TS_CHECK(n <= n_layers, "sparsity ", sparsity, " needs ", n, " of the ", n_layers, " layers");
  return n;
}

}  // namespace ts
