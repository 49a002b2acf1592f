#pragma once
// The hot inner loops, one table per instruction set: a scalar reference and AVX2/AVX-512
// versions that tests compare against it. Callers use ops(), chosen once at run time.
#include <bit>
#include <cstddef>
#include <cstdint>

#include "core/cpu_features.h"
#include "kernels/key_rows.h"
#include "kernels/kv_codes.h"
#include "kernels/q8_activations.h"
#include "kernels/quant_types.h"

namespace ts {

// sqrt(2 / pi): GELU's tanh approximation (gelu_mul).
inline constexpr float kGeluTanhScale = 0.7978845608f;

// Rows per block of dot_f16_blocks.
inline constexpr size_t kF16Block = 16;

// compress_range's counts.
struct RangeCount {
  size_t in_range = 0, above = 0;
};

struct SimdOps {
  const char* name;
  // y[t * y_stride + r] = sum_k w[r * cols + k] * x[t * x_stride + k]  for r < n_rows, t < n_tok.
  // The register-blocked core of every matrix product (weights already converted to float).
  void (*gemm_f32)(const float* w, size_t n_rows, const float* x, size_t x_stride, size_t n_tok, size_t cols,
                   float* y, size_t y_stride);
  // The same product for BF16 weight rows and activations already rounded to BF16 (f32_to_bf16):
  // every product of two BF16 values is exact in float, and the sums are float (vdpbf16ps on AVX-512).
  void (*gemm_bf16)(const uint16_t* w, size_t n_rows, const uint16_t* x, size_t x_stride, size_t n_tok,
                    size_t cols, float* y, size_t y_stride);
  // Round-to-nearest-even float to BF16 (the activations of gemm_bf16).
  void (*f32_to_bf16)(const float* x, uint16_t* y, size_t n);
  float (*dot_f32)(const float* a, const float* b, size_t n);
  // Attention over an F16 KV cache: q·k and y += a·v with k, v in IEEE half precision.
  float (*dot_f16_f32)(const uint16_t* k, const float* q, size_t n);
  void (*axpy_f16)(float a, const uint16_t* v, float* y, size_t n);
  // One query against many F16 rows stored in blocks of kF16Block rows, each block dimension-major
  // ([dim][kF16Block]) and block_stride elements after the previous one: the importance keys
  // TokenButler ranks every position by. Scores of a block are then vertical multiply-adds of a
  // broadcast query element, with no horizontal sum per row.
  //   out[j] = sum_{x < n} q[x] * k[(j / kF16Block) * block_stride + x * kF16Block + j % kF16Block]
  // for j < n_rows; k holds whole blocks (the last one is read in full, only n_rows are written).
  void (*dot_f16_blocks)(const uint16_t* k, size_t block_stride, size_t n_rows, const float* q, size_t n,
                         float* out);
  // The same rows as int8 codes with one scale per row (scales[j], whole blocks too; half the
  // bytes of F16), dimensions in pairs, [block][x / 2][kF16Block][x % 2] (n even), against a
  // query rounded to integers by round_query_i16: exact integer sums, two products per
  // instruction (vpmaddwd), instead of a conversion to float per code. n even, at most
  // kI8PairsMaxWidth (the sums stay inside int32).
  //   out[j] = float(sum_{x < n} q[x] * k[(j / kF16Block) * block_stride + x / 2 * 2 * kF16Block +
  //            j % kF16Block * 2 + x % 2]) * (scales[j] * q_scale)
  void (*dot_i8_pairs)(const int8_t* k, size_t block_stride, const float* scales, size_t n_rows,
                       const int16_t* q, float q_scale, size_t n, float* out);
  // The j < n with lo <= keys[j] <= hi (unsigned), in order: values[j] written to out[0 ..
  // in_range) (out has room for n; out[in_range .. n) may be overwritten), and how many keys lie
  // above hi. The branch-free core of
  // top-k selection (select_top_keys): the keys bracketing the threshold, then the positions kept.
  RangeCount (*compress_range)(const uint32_t* keys, const uint32_t* values, size_t n, uint32_t lo,
                               uint32_t hi, uint32_t* out);
  void (*f32_to_f16)(const float* x, uint16_t* y, size_t n);
  // y = x / rms(x) * weight
  void (*rms_norm)(const float* x, const float* weight, float* y, size_t n, float eps);
  // gate = silu(gate) * up (SwiGLU)
  void (*silu_mul)(float* gate, const float* up, size_t n);
  // gate = gelu(gate) * up (GeGLU), GELU's tanh approximation: x * sigmoid(2 * sqrt(2/pi) * (x + 0.044715
  // x^3))
  void (*gelu_mul)(float* gate, const float* up, size_t n);
  // x = softmax(x), in place
  void (*softmax)(float* x, size_t n);
  // Rotates the first rot_dim dims of one head with tables from rope_tables(); neox selects the
  // pairing (x[i], x[i + rot_dim/2]) instead of (x[2i], x[2i+1]).
  void (*rope)(float* x, const float* cos_t, const float* sin_t, size_t rot_dim, bool neox);
  // One chunk of online-softmax attention: n_q query vectors (head_dim floats each, the query
  // heads sharing one KV head) over key/value rows j < n_keys (F16, `stride` elements apart).
  // Writes, per query g, the partial result m[g] = max score, l[g] = sum exp(score - m[g]) and
  // acc[g * head_dim ..] = sum exp(score - m[g]) * v_j, which merge across chunks.
  void (*attn_chunk)(const float* q, size_t n_q, const uint16_t* k, const uint16_t* v, size_t stride,
                     size_t n_keys, size_t head_dim, float scale, float* m, float* l, float* acc);
  // attn_chunk over the listed key/value rows rows[0..n_keys) instead of a contiguous chunk: the
  // sparse attention of key-selecting policies (TokenButler, Oracle, Quest, H2O), no key copies.
  // With p (n_q x n_keys), also each exp(score - m[g]): the probabilities observers (H2O) watch.
  // v == nullptr: the scores only (p required; acc neither read nor written), for policies that
  // need a step's probabilities before the attention runs (H2O's and SnapKV's simulated eviction).
  // masks (nullptr: every query reads every row): query g reads row j only where bit g of
  // masks[j] is set (n_q <= 8): a KV group's union of per-head lists, each row gathered once for
  // the heads that chose it (a masked row's weight is exp's floor, ~1e-38 of the largest, where
  // not exactly 0). A query no row is for gets m = -inf, l = 0 (merges as nothing).
  void (*attn_gather)(const float* q, size_t n_q, const uint16_t* k, const uint16_t* v, size_t stride,
                      const uint32_t* rows, const uint8_t* masks, size_t n_keys, size_t head_dim, float scale,
                      float* m, float* l, float* acc, float* p);
  // attn_chunk over n_keys consecutive coded rows (kernels/kv_codes.h) of one KV head: the keys
  // and values are decoded in registers (scale * code + min per segment) as they stream by, so the
  // cache is read at its coded width. Row j's score for query g = coded_key_score(key, scale * q)
  // + bias with q and bias those of row j's query set (CodedQueries): keys of 4 or 2 bits against
  // the scaled query rounded to 8 bits, integer products (kv_codes.h). KIVI callers pass each key
  // block's per-channel ranges beside the queries and the kernel folds them into a set of queries
  // and biases per block, so a run over many blocks is one call. With p (n_q x n_keys), also each
  // exp(score - m[g]).
  void (*attn_codes)(const CodedQueries& q, const CodedRows& k, const CodedRows& v, size_t n_keys,
                     size_t head_dim, float scale, float* m, float* l, float* acc, float* p);

  // Quantizes n floats (n % 32 == 0) to int8 blocks: d = max|x| / 127, q = round-half-even(x / d),
  // and sums[2b], sums[2b + 1] the sums of q over each half of block b.
  void (*quantize_q8)(const float* x, size_t n, int8_t* qs, float* d, int16_t* sums);
  // y[t * y_stride + r] = dot(weight row r, activation row t0 + t) for r < n_rows, t < n_tok, over
  // weights packed in groups of 16 rows (kernels/packed_rows.h; every packable type): rows
  // 0..n_rows of the groups starting at w, of `cols` columns.
  void (*gemm_packed)(QuantType type, const uint8_t* w, size_t n_rows, size_t cols, const Q8Activations& x,
                      size_t t0, size_t n_tok, float* y, size_t y_stride);
};

// Round to nearest even, as f32_to_bf16 (and vcvtneps2bf16); NaN stays a quiet NaN.
inline uint16_t float_to_bf16(float f) {
  const auto u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// q[x] ~ scale * out[x] with |out[x]| <= kQueryI16Max (returns scale; 0 for a zero query): the
// query of dot_i8_pairs. 13 bits keep a sum of 2048 products of int8 codes inside int32, and the
// rounding (2^-14 of the largest element) far below the int8 codes' own.
inline constexpr int kQueryI16Max = 8191;
inline constexpr size_t kI8PairsMaxWidth = 2048;
float round_query_i16(const float* q, size_t n, int16_t* out);

const SimdOps& scalar_ops();
const SimdOps& avx2_ops();
const SimdOps& avx512_ops();
const SimdOps& simd_ops(SimdLevel level);
const SimdOps& ops();  // for active_simd_level(), resolved once

}  // namespace ts
