#pragma once
// Moving a subset of a batch's rows into a compact batch and back, so that a layer step run on a
// token subset costs matrix products over the subset only.
#include <cstddef>
#include <cstdint>
#include <span>

namespace ts {

// dst row i = src row rows[i]; rows are `width` floats.
void gather_rows(const float* src, std::span<const uint32_t> rows, size_t width, float* dst);

// dst row rows[i] += src row i.
void scatter_add_rows(const float* src, std::span<const uint32_t> rows, size_t width, float* dst);

}  // namespace ts
