#pragma once
// Keys and values of past tokens per layer, stored in IEEE half precision (as llama.cpp's
// default), row t holding all KV heads of the token at position t.
#include <cstddef>
#include <cstdint>
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

  void set_size(size_t n) { n_used_ = n; }  // after writing new positions, or to drop a suffix
  void clear() { n_used_ = 0; }

 private:
  size_t n_layers_, n_ctx_, kv_dim_;
  size_t n_used_ = 0;
  std::vector<uint16_t> keys_, values_;
};

}  // namespace ts
