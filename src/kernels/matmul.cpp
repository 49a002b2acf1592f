#include "kernels/matmul.h"

#include <algorithm>
#include <vector>

#include "kernels/simd_ops.h"

namespace ts {
namespace {
// Rows handled per task (converted to float at a time on the float path), and tokens per pass
// over them (the activation tile stays in L2).
constexpr size_t kRowTile = 16;
constexpr size_t kTokenTile = 64;

using QuantDotFn = float (*)(const uint8_t*, const Q8Row&, size_t);

// Types with an integer dot product against 8-bit activations; others take the float path.
QuantDotFn quant_dot_for(QuantType type, const SimdOps& k) {
  switch (type) {
    case QuantType::Q4_0: return k.dot_q4_0;
    case QuantType::Q4_1: return k.dot_q4_1;
    case QuantType::Q8_0: return k.dot_q8_0;
    default: return nullptr;
  }
}

void quantize_activations(const float* x, size_t n_tok, size_t cols, Q8Activations& q, ThreadPool& pool) {
  const SimdOps& k = ops();
  q.n_tok = n_tok;
  q.cols = cols;
  q.qs.resize(n_tok * cols);
  q.d.resize(n_tok * q.blocks_per_row());
  q.s.resize(n_tok * q.blocks_per_row());
  pool.parallel_for(n_tok, [&](size_t b, size_t e, int) {
    for (size_t t = b; t < e; ++t)
      k.quantize_q8(x + t * cols, cols, q.qs.data() + t * cols, q.d.data() + t * q.blocks_per_row(),
                    q.s.data() + t * q.blocks_per_row());
  });
}

void matmul_quantized(const WeightView& w, QuantDotFn dot, const float* x, size_t n_tok, float* y,
                      ThreadPool& pool) {
  thread_local Q8Activations q;  // per calling thread: the pool's owner reuses it across layers
  quantize_activations(x, n_tok, w.cols, q, pool);
  const size_t n_blocks = w.cols / kQ8Block, stride = w.row_stride();
  const size_t n_tiles = (w.rows + kRowTile - 1) / kRowTile;
  const Q8Activations& qa = q;
  pool.parallel_for(n_tiles, [&](size_t begin, size_t end, int) {
    for (size_t t0 = 0; t0 < n_tok; t0 += kTokenTile) {
      const size_t t1 = std::min(n_tok, t0 + kTokenTile);
      for (size_t r = begin * kRowTile; r < std::min(w.rows, end * kRowTile); ++r) {
        const uint8_t* row = w.data + r * stride;
        for (size_t t = t0; t < t1; ++t) y[t * w.rows + r] = dot(row, {qa.row_qs(t), qa.row_d(t), qa.row_s(t)}, n_blocks);
      }
    }
  });
}

void matmul_float(const WeightView& w, const float* x, size_t n_tok, float* y, ThreadPool& pool) {
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

}  // namespace

void weight_row_to_float(const WeightView& w, size_t row, float* dst) {
  w.traits->to_float(w.data + row * w.row_stride(), dst, w.cols);
}

void matmul(const WeightView& w, const float* x, size_t n_tok, float* y, ThreadPool& pool) {
  if (QuantDotFn dot = quant_dot_for(w.traits->type, ops()); dot && w.cols % kQ8Block == 0) {
    matmul_quantized(w, dot, x, n_tok, y, pool);
  } else {
    matmul_float(w, x, n_tok, y, pool);
  }
}

}  // namespace ts
