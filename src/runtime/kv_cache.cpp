#include "runtime/kv_cache.h"

namespace ts {

KvCache::KvCache(size_t n_layers, size_t n_ctx, size_t kv_dim)
    : n_layers_(n_layers),
      n_ctx_(n_ctx),
      kv_dim_(kv_dim),
      keys_(n_layers * n_ctx * kv_dim),
      values_(n_layers * n_ctx * kv_dim) {}

}  // namespace ts
