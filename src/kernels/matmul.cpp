#include "kernels/matmul.h"

#include <algorithm>
#include <vector>

#include "kernels/simd_ops.h"

namespace ts {
namespace {
// Rows converted to float at a time (kept in L1/L2), and tokens per pass over them (x tile in L2).
constexpr size_t kRowTile = 16;
constexpr size_t kTokenTile = 64;
}  // namespace

void weight_row_to_float(const WeightView& w, size_t row, float* dst) {
  w.traits->to_float(w.data + row * w.row_stride(), dst, w.cols);
}

void matmul(const WeightView& w, const float* x, size_t n_tok, float* y, ThreadPool& pool) {
  const SimdOps& k = ops();
  const bool is_f32 = w.traits->type == QuantType::F32;
  const size_t n_tiles = (w.rows + kRowTile - 1) / kRowTile;
  pool.parallel_for(n_tiles, [&](size_t begin, size_t end, int) {
    thread_local std::vector<float> buf;
    if (!is_f32) buf.resize(kRowTile * w.cols);
    for (size_t tile = begin; tile < end; ++tile) {
      const size_t r0 = tile * kRowTile, nr = std::min(kRowTile, w.rows - r0);
      const float* wf;
      if (is_f32) {
        wf = reinterpret_cast<const float*>(w.data + r0 * w.row_stride());
      } else {
        w.traits->to_float(w.data + r0 * w.row_stride(), buf.data(), nr * w.cols);
        wf = buf.data();
      }
      for (size_t t0 = 0; t0 < n_tok; t0 += kTokenTile) {
        const size_t nt = std::min(kTokenTile, n_tok - t0);
        k.gemm_f32(wf, nr, x + t0 * w.cols, w.cols, nt, w.cols, y + t0 * w.rows + r0, w.rows);
      }
    }
  });
}

}  // namespace ts
