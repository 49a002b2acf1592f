#pragma once
// Keys and values of past tokens per layer, stored in IEEE half precision (as llama.cpp's
// default), row t holding all KV heads of the token at position t.
//
// Each layer holds every position written so far, unless a policy left tokens out of that layer
// (SLEB skips it, OrthoRank's no-K/V ablation, Token Filtering) or evicted them (H2O, StreamingLLM,
// ZipVL). Such a layer lists the positions it holds; attention reads only those, and positions
// keep their numbers (RoPE was applied at the original position).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ts {

class KvCache {
 public:
  KvCache(size_t n_layers, size_t n_ctx, size_t kv_dim);

  size_t capacity() const { return n_ctx_; }
  size_t size() const { return n_used_; }  // tokens currently cached (positions 0..size-1)
  size_t kv_dim() const { return kv_dim_; }
  size_t bytes_per_token() const { return n_layers_ * kv_dim_ * 2 * sizeof(uint16_t); }

  uint16_t* key(size_t layer, size_t pos) { return &keys_[(layer * n_ctx_ + pos) * kv_dim_]; }
  uint16_t* value(size_t layer, size_t pos) { return &values_[(layer * n_ctx_ + pos) * kv_dim_]; }
  const uint16_t* key(size_t layer, size_t pos) const { return &keys_[(layer * n_ctx_ + pos) * kv_dim_]; }
  const uint16_t* value(size_t layer, size_t pos) const { return &values_[(layer * n_ctx_ + pos) * kv_dim_]; }

  // After writing new positions, or to drop a suffix (also from the layers' held positions).
  void set_size(size_t n);
  void clear() { set_size(0); }

  bool holds_all(size_t layer) const { return !partial_[layer]; }
  // Fraction of the cached positions this layer holds (1 without holes; 1 when empty).
  double held_fraction(size_t layer) const {
    return holds_all(layer) || n_used_ == 0 ? 1.0
                                            : static_cast<double>(held(layer, n_used_ - 1).size()) / n_used_;
  }
  // The positions a layer holds up to and including `pos` (below size() or in the batch being
  // written), ascending.
  std::span<const uint32_t> held(size_t layer, size_t pos) const;
  // The batch at positions pos0.. wrote only `stored` (ascending) at this layer.
  void hold_only(size_t layer, size_t pos0, std::span<const uint32_t> stored);
  // The batch at positions pos0..pos0+n_tok-1 wrote all of them (a no-op on layers without holes).
  void hold_all(size_t layer, size_t pos0, size_t n_tok);
  void evict(size_t layer, std::span<const uint32_t> positions);

 private:
  void list_held(size_t layer, size_t up_to);  // a layer gets its first hole

  size_t n_layers_, n_ctx_, kv_dim_;
  size_t n_used_ = 0;
  std::vector<uint16_t> keys_, values_;
  std::vector<uint32_t> all_positions_;      // 0, 1, ..., n_ctx - 1: held() of layers without holes
  std::vector<uint8_t> partial_;             // per layer: has holes, positions listed in held_
  std::vector<std::vector<uint32_t>> held_;  // per partial layer, ascending
};

}  // namespace ts
