#pragma once
// Matrix products against stored (possibly quantized) weights, split across the thread pool.
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "core/thread_pool.h"
#include "kernels/quant_types.h"

namespace ts {

// A weight matrix as stored in the file: `rows` rows of `cols` elements, row-major in blocks; and,
// for the fast integer products, optionally the same rows packed in groups (kernels/packed_rows.h).
struct WeightView {
  const QuantTraits* traits = nullptr;
  const uint8_t* data = nullptr;
  size_t rows = 0, cols = 0;
  const uint8_t* packed = nullptr;
  size_t row_stride() const { return row_bytes(*traits, cols); }
};

// Fast: activations quantized to 8-bit blocks for integer products with packed weights (as
// llama.cpp; the default; BF16 weights by BF16 products, others in float). Exact: weights converted to float and multiplied in float32, to compare with a
// float reference implementation.
enum class MatmulPrecision { Fast, Exact };

// y[t][r] = dot(w row r, x[t]) for t < n_tok; x rows are `cols` floats apart, y rows `w.rows` apart.
void matmul(const WeightView& w, const float* x, size_t n_tok, float* y, ThreadPool& pool,
            MatmulPrecision precision = MatmulPrecision::Fast);

// Several products of the same input (Q/K/V, gate/up) in one parallel region: the input is
// quantized once and the threads share the rows of all matrices.
struct MatmulJob {
  const WeightView* w;
  float* y;
};
void matmul_many(std::initializer_list<MatmulJob> jobs, const float* x, size_t n_tok, ThreadPool& pool,
                 MatmulPrecision precision = MatmulPrecision::Fast);

// Converts one stored row to floats (embedding lookup).
void weight_row_to_float(const WeightView& w, size_t row, float* dst);

}  // namespace ts
