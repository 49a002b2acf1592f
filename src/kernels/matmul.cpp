#include "kernels/matmul.h"

#include <algorithm>
#include <vector>

#include "kernels/packed_rows.h"
#include "kernels/simd_ops.h"

namespace ts {
namespace {
// Rows handled per task (converted to float at a time on the float path; one packed group), and
// tokens per pass over them (the activation tile stays in L2).
constexpr size_t kRowTile = kPackRows;
constexpr size_t kTokenTile = 64;

void quantize_activations(const float* x, size_t n_tok, size_t cols, Q8Activations& q, ThreadPool& pool) {
  const SimdOps& k = ops();
  q.n_tok = n_tok;
  q.cols = cols;
  q.qs.resize(n_tok * cols);
  q.d.resize(n_tok * q.blocks_per_row());
  q.sums.resize(2 * n_tok * q.blocks_per_row());
  pool.parallel_for(n_tok, [&](size_t b, size_t e, int) {
    for (size_t t = b; t < e; ++t) {
      const size_t at = t * q.blocks_per_row();
      k.quantize_q8(x + t * cols, cols, q.qs.data() + t * cols, q.d.data() + at, q.sums.data() + 2 * at);
    }
  });
}

// Row tiles of all jobs, numbered consecutively so one parallel_for covers every matrix.
void matmul_quantized(std::initializer_list<MatmulJob> jobs, const float* x, size_t n_tok, ThreadPool& pool) {
  thread_local Q8Activations q_storage;  // per calling thread: reused across layers
  // Workers must see the caller's buffer: a thread_local named inside the lambda would be theirs.
  Q8Activations& q = q_storage;
  const size_t cols = jobs.begin()->w->cols;
  quantize_activations(x, n_tok, cols, q, pool);
  const SimdOps& k = ops();
  size_t n_tiles = 0;
  for (const MatmulJob& j : jobs) n_tiles += (j.w->rows + kRowTile - 1) / kRowTile;
  pool.parallel_for(n_tiles, [&](size_t begin, size_t end, int) {
    size_t first_tile = 0;
    for (const MatmulJob& j : jobs) {
      const WeightView& w = *j.w;
      const size_t tiles = (w.rows + kRowTile - 1) / kRowTile;
      const size_t b = std::max(begin, first_tile), e = std::min(end, first_tile + tiles);
      if (b < e) {
        const size_t r0 = (b - first_tile) * kRowTile, r1 = std::min(w.rows, (e - first_tile) * kRowTile);
        for (size_t t0 = 0; t0 < n_tok; t0 += kTokenTile) {
          const size_t nt = std::min(kTokenTile, n_tok - t0);
          k.gemm_packed(w.traits->type, w.packed + r0 / kPackRows * packed_group_bytes(w.traits->type, w.cols),
                        r1 - r0, w.cols, q, t0, nt, j.y + t0 * w.rows + r0, w.rows);
        }
      }
      first_tile += tiles;
    }
  });
}

// Cache blocking of the float-accumulating products: each thread takes tiles of kRowTile rows,
// and each tile (in L1) meets the tokens kTokenTile at a time (in L2): fn(r0, n_rows, t0, n_tok)
// for every token tile of every row tile, a row tile's token tiles in order on one thread.
template <class Fn>
void for_each_tile(const WeightView& w, size_t n_tok, ThreadPool& pool, Fn&& fn) {
  pool.parallel_for((w.rows + kRowTile - 1) / kRowTile, [&](size_t begin, size_t end, int) {
    for (size_t tile = begin; tile < end; ++tile) {
      const size_t r0 = tile * kRowTile, nr = std::min(kRowTile, w.rows - r0);
      for (size_t t0 = 0; t0 < n_tok; t0 += kTokenTile) fn(r0, nr, t0, std::min(kTokenTile, n_tok - t0));
    }
  });
}

void matmul_float(const WeightView& w, const float* x, size_t n_tok, float* y, ThreadPool& pool) {
  const SimdOps& k = ops();
  const bool is_f32 = w.traits->type == QuantType::F32;
  for_each_tile(w, n_tok, pool, [&](size_t r0, size_t nr, size_t t0, size_t nt) {
    thread_local std::vector<float> buf;  // the tile's rows converted to float, once per tile
    const float* wf = reinterpret_cast<const float*>(w.data + r0 * w.row_stride());
    if (!is_f32) {
      if (t0 == 0) {
        buf.resize(kRowTile * w.cols);
        w.traits->to_float(w.data + r0 * w.row_stride(), buf.data(), nr * w.cols);
      }
      wf = buf.data();
    }
    k.gemm_f32(wf, nr, x + t0 * w.cols, w.cols, nt, w.cols, y + t0 * w.rows + r0, w.rows);
  });
}

// BF16 weights are multiplied as stored, by activations rounded to BF16 once per call.
void matmul_bf16(const WeightView& w, const float* x, size_t n_tok, float* y, ThreadPool& pool) {
  const SimdOps& k = ops();
  thread_local std::vector<uint16_t> x_storage;  // per calling thread, as in matmul_quantized
  std::vector<uint16_t>& xb = x_storage;
  xb.resize(n_tok * w.cols);
  k.f32_to_bf16(x, xb.data(), n_tok * w.cols);
  const auto* wb = reinterpret_cast<const uint16_t*>(w.data);
  for_each_tile(w, n_tok, pool, [&](size_t r0, size_t nr, size_t t0, size_t nt) {
    k.gemm_bf16(wb + r0 * w.cols, nr, xb.data() + t0 * w.cols, w.cols, nt, w.cols, y + t0 * w.rows + r0,
                w.rows);
  });
}

}  // namespace

void weight_row_to_float(const WeightView& w, size_t row, float* dst) {
  w.traits->to_float(w.data + row * w.row_stride(), dst, w.cols);
}

void matmul(const WeightView& w, const float* x, size_t n_tok, float* y, ThreadPool& pool,
            MatmulPrecision precision) {
  matmul_many({{&w, y}}, x, n_tok, pool, precision);
}

void matmul_many(std::initializer_list<MatmulJob> jobs, const float* x, size_t n_tok, ThreadPool& pool,
                 MatmulPrecision precision) {
  bool all_packed = precision == MatmulPrecision::Fast;
  for (const MatmulJob& j : jobs) all_packed = all_packed && j.w->packed;
  if (all_packed) return matmul_quantized(jobs, x, n_tok, pool);
  for (const MatmulJob& j : jobs) {
    if (precision == MatmulPrecision::Fast && j.w->packed) {
      matmul_quantized({j}, x, n_tok, pool);
    } else if (precision == MatmulPrecision::Fast && j.w->traits->type == QuantType::BF16) {
      matmul_bf16(*j.w, x, n_tok, j.y, pool);
    } else {
      matmul_float(*j.w, x, n_tok, j.y, pool);
    }
  }
}

}  // namespace ts
