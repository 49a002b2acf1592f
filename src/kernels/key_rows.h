#pragma once
// How attention kernels address their j-th key/value row: a contiguous chunk (dense attention)
// or a gathered list of cached positions (policies that select keys). Kernels are templates over
// these, so both paths share one body.
#include <cstddef>
#include <cstdint>

namespace ts {

struct ContiguousRows {
  size_t operator[](size_t j) const { return j; }
};

struct ListedRows {
  const uint32_t* rows;
  size_t operator[](size_t j) const { return rows[j]; }
};

}  // namespace ts
