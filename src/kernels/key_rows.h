#pragma once
// How attention kernels address their j-th key/value row: a contiguous chunk (dense attention)
// or a gathered list of cached positions (policies that select keys). Kernels are templates over
// these, so both paths share one body.
#include <cstddef>
#include <cstdint>

namespace ts {

// prefetch(base, stride, row_bytes, j, n): asks for row j (if j < n) ahead of its use. Only the
// gathered rows need it: a contiguous chunk is a stream the hardware prefetcher follows, listed
// rows jump.
struct ContiguousRows {
  size_t operator[](size_t j) const { return j; }
  void prefetch(const uint16_t*, size_t, size_t, size_t, size_t) const {}
};

// prefetch is always inlined: GCC 12 finds an out-of-line copy free of side effects (its
// __builtin_prefetch counts as none) and deletes the calls, which left the gathers unprefetched.
struct ListedRows {
  const uint32_t* rows;
  size_t operator[](size_t j) const { return rows[j]; }
  [[gnu::always_inline]] void prefetch(const uint16_t* base, size_t stride, size_t row_bytes, size_t j,
                                       size_t n) const {
    if (j >= n) return;
    const char* row = reinterpret_cast<const char*>(base + rows[j] * stride);
    for (size_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(row + b);
  }
};

// How many rows ahead a gathering kernel prefetches: enough to cover a memory access's latency
// with the work of the rows in between.
inline constexpr size_t kPrefetchRows = 8;

}  // namespace ts
