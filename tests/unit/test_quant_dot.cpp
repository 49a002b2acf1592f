// Packed integer products: for every row of kPackedForms, the packing read back, the scalar
// reference against dequantized float math (the gguf-checked to_float), and every SIMD table
// against the scalar reference, on random blocks with odd row, block and token counts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/packed_rows.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_codes.h"
#include "kernels/quant_types.h"
#include "kernels/simd_ops.h"

namespace ts {
namespace {

// Byte offsets of a block type's fp16 scale fields (d, and m or dmin where the type has one).
std::vector<size_t> half_fields(QuantType type) {
  switch (type) {
    case QuantType::Q4_1:
    case QuantType::Q5_1:
    case QuantType::Q4_K:
    case QuantType::Q5_K:
      return {0, 2};
    case QuantType::Q2_K:
      return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case QuantType::Q3_K:
      return {offsetof(BlockQ3_K, d)};
    case QuantType::Q6_K:
      return {offsetof(BlockQ6_K, d)};
    default:
      return {0};
  }
}

// Random but well-formed weight blocks: every byte random (codes, bit planes and packed integer
// scales), then sane fp16 values written over the fp16 fields so values stay finite.
std::vector<uint8_t> random_blocks(QuantType type, size_t n_blocks, uint32_t seed) {
  const QuantTraits& t = quant_traits(type);
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(n_blocks * t.block_bytes);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (size_t b = 0; b < n_blocks; ++b)
    for (size_t offset : half_fields(type)) {
      const uint16_t h = float_to_fp16(scale(rng));
      std::memcpy(bytes.data() + b * t.block_bytes + offset, &h, 2);
    }
  return bytes;
}

// Weights of one gemm shape (random blocks, row-major) with their packed copy, and quantized
// activations for tokens 0..t0+n_tok.
struct GemmCase {
  QuantType type;
  size_t rows, w_blocks, n_tok, t0;
  std::vector<uint8_t> w, packed;
  Q8Activations x;
  std::vector<float> xf;  // the activations before quantization
  size_t cols() const { return w_blocks * quant_traits(type).block_elems; }
  size_t stride() const { return w_blocks * quant_traits(type).block_bytes; }
};

Q8Activations quantize(const SimdOps& k, const std::vector<float>& xf, size_t n_tok, size_t cols) {
  Q8Activations q;
  q.n_tok = n_tok;
  q.cols = cols;
  q.qs.resize(n_tok * cols);
  q.d.resize(n_tok * q.blocks_per_row());
  q.sums.resize(2 * n_tok * q.blocks_per_row());
  for (size_t t = 0; t < n_tok; ++t) {
    const size_t at = t * q.blocks_per_row();
    k.quantize_q8(xf.data() + t * cols, cols, q.qs.data() + t * cols, q.d.data() + at,
                  q.sums.data() + 2 * at);
  }
  return q;
}

std::vector<float> random_activations(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

GemmCase gemm_case(QuantType type, size_t rows, size_t w_blocks, size_t n_tok, uint32_t seed) {
  GemmCase c{type, rows, w_blocks, n_tok, 1, random_blocks(type, rows * w_blocks, seed), {}, {}, {}};
  c.packed.resize(packed_bytes(type, rows, c.cols()));
  pack_rows(type, c.w.data(), rows, c.cols(), c.packed.data());
  c.xf = random_activations((n_tok + c.t0) * c.cols(), seed + 1);
  c.x = quantize(scalar_ops(), c.xf, n_tok + c.t0, c.cols());
  return c;
}

// Every quantized type of the reference table.
std::vector<QuantType> block_types() {
  std::vector<QuantType> out;
  for (uint32_t id = 0; id < 64; ++id)
    if (const auto t = quant_traits(id); t && t->block_elems > 1) out.push_back(t->type);
  return out;
}

TEST(PackedForms, EveryBlockTypeHasARowAndFloatTypesNone) {
  EXPECT_EQ(block_types().size(), std::size(kPackedForms));
  for (QuantType type : block_types()) {
    const PackedForm f = packed_form(type);
    EXPECT_TRUE(f.packed()) << quant_traits(type).name;
    EXPECT_EQ(f.block_cols(), quant_traits(type).block_elems) << quant_traits(type).name;
    // The packed copy replaces the stored rows: at most 20% larger (Q2_K's 2-bit codes in nibbles).
    const size_t stored = kPackRows * quant_traits(type).block_bytes;
    EXPECT_LE(f.block_bytes(), stored * 6 / 5) << quant_traits(type).name;
  }
  for (QuantType type : {QuantType::F32, QuantType::F16, QuantType::BF16}) EXPECT_FALSE(packable(type));
}

TEST(PackedForms, PackedCodesReadBackAsTheBlockCodes) {
  for (const PackedForm& f : kPackedForms) {
    const GemmCase c = gemm_case(f.type, 19, 3, 1, 7);
    const QuantTraits& t = quant_traits(f.type);
    std::vector<int> want(t.block_elems), got(kPackCols);
    for (size_t r = 0; r < c.rows; ++r)
      for (size_t b = 0; b < c.w_blocks; ++b) {
        block_codes(f.type, c.w.data() + r * c.stride() + b * t.block_bytes, want.data());
        const uint8_t* block =
            c.packed.data() + (r / kPackRows) * packed_group_bytes(f.type, c.cols()) + b * f.block_bytes();
        for (size_t k = 0; k < f.block_cols() / kPackCols; ++k) {
          unit_codes(f, block + f.header_bytes() + k * f.unit_bytes(), r % kPackRows, got.data());
          for (size_t e = 0; e < kPackCols; ++e)
            ASSERT_EQ(got[e], want[k * kPackCols + e])
                << t.name << " row " << r << " unit " << k << " element " << e;
        }
      }
  }
}

TEST(QuantDot, ScalarQuantizationRoundTripsWithinHalfAStep) {
  const std::vector<float> xf = random_activations(96, 11);
  const Q8Activations a = quantize(scalar_ops(), xf, 1, 96);
  for (size_t i = 0; i < xf.size(); ++i) {
    const float step = a.d[i / kQ8Block];
    EXPECT_NEAR(a.qs[i] * step, xf[i], 0.5f * step + 1e-6f);
  }
  for (size_t b = 0; b < a.d.size(); ++b) {
    int sum = 0, first = 0;
    for (size_t i = 0; i < kQ8Block; ++i) {
      sum += a.qs[b * kQ8Block + i];
      if (i < 16) first += a.qs[b * kQ8Block + i];
    }
    EXPECT_EQ(a.sums[2 * b], first);
    EXPECT_EQ(a.sums[2 * b + 1], sum - first);
  }
}

// The reference: weights through the (ggml-exact, gguf-checked) to_float conversion, activations
// as q * d, summed in double. Rows around the 16-row group, odd block counts.
TEST(PackedGemm, ScalarEqualsDequantizedFloatProduct) {
  for (const PackedForm& f : kPackedForms)
    for (size_t rows : {1u, 7u, 16u, 35u})
      for (size_t w_blocks : {1u, 3u}) {
        const GemmCase c = gemm_case(f.type, rows, w_blocks, 3, 21 + static_cast<uint32_t>(rows));
        const size_t cols = c.cols(), ys = rows + 2;
        std::vector<float> wf(rows * cols), got(c.n_tok * ys, -1.0f);
        quant_traits(f.type).to_float(c.w.data(), wf.data(), rows * cols);
        scalar_ops().gemm_packed(f.type, c.packed.data(), rows, cols, c.x, c.t0, c.n_tok, got.data(), ys);
        for (size_t t = 0; t < c.n_tok; ++t)
          for (size_t r = 0; r < rows; ++r) {
            double expect = 0.0, magnitude = 0.0;
            for (size_t i = 0; i < cols; ++i) {
              const double x = double(c.x.row_qs(c.t0 + t)[i]) * c.x.row_d(c.t0 + t)[i / kQ8Block];
              expect += double(wf[r * cols + i]) * x;
              magnitude += std::fabs(double(wf[r * cols + i]) * x);
            }
            ASSERT_NEAR(got[t * ys + r], expect, 1e-5 * (1 + magnitude))
                << quant_traits(f.type).name << " rows=" << rows << " blocks=" << w_blocks << " t=" << t
                << " r=" << r;
          }
      }
}

class QuantDotSimd : public ::testing::TestWithParam<SimdLevel> {
 protected:
  void SetUp() override {
    if (GetParam() > detected_simd_level()) GTEST_SKIP() << "CPU lacks " << simd_level_name(GetParam());
  }
};

TEST_P(QuantDotSimd, QuantizeMatchesScalarExactly) {
  for (size_t n : {32u, 64u, 96u, 576u}) {
    const std::vector<float> xf = random_activations(n, 5);
    const Q8Activations ref = quantize(scalar_ops(), xf, 1, n),
                        got = quantize(simd_ops(GetParam()), xf, 1, n);
    EXPECT_EQ(got.qs, ref.qs);
    EXPECT_EQ(got.d, ref.d);
    EXPECT_EQ(got.sums, ref.sums);
  }
}

// Row counts around the 16-row group (a padded last group), block counts with odd tails, token
// counts below and above the SIMD token tiles.
TEST_P(QuantDotSimd, PackedGemmMatchesScalar) {
  const SimdOps& k = simd_ops(GetParam());
  for (const PackedForm& f : kPackedForms)
    for (size_t rows : {5u, 16u, 35u})
      for (size_t w_blocks : {1u, 3u, 18u})
        for (size_t n_tok : {1u, 2u, 9u, 19u}) {
          if (f.k_quant && w_blocks == 18 && n_tok > 2) continue;  // 4608 columns: covered at 1-2 tokens
          const GemmCase c = gemm_case(f.type, rows, w_blocks, n_tok, 61);
          const size_t ys = rows + 3, n_units = c.cols() / kPackCols;
          std::vector<float> ref(n_tok * ys, -1.0f), got(n_tok * ys, -1.0f);
          scalar_ops().gemm_packed(f.type, c.packed.data(), rows, c.cols(), c.x, c.t0, n_tok, ref.data(), ys);
          k.gemm_packed(f.type, c.packed.data(), rows, c.cols(), c.x, c.t0, n_tok, got.data(), ys);
          // Integer group sums are exact; only the float accumulation order differs.
          for (size_t i = 0; i < ref.size(); ++i)
            ASSERT_NEAR(got[i], ref[i], 1e-5f * (1.0f + std::fabs(ref[i])) * static_cast<float>(n_units))
                << quant_traits(f.type).name << " rows=" << rows << " blocks=" << w_blocks
                << " tokens=" << n_tok << " at " << i;
          // A call on the later groups only (as the threads of matmul split them) computes their rows.
          if (rows <= kPackRows) continue;
          std::vector<float> part(n_tok * ys, -1.0f);
          k.gemm_packed(f.type, c.packed.data() + packed_group_bytes(f.type, c.cols()), rows - kPackRows,
                        c.cols(), c.x, c.t0, n_tok, part.data(), ys);
          for (size_t t = 0; t < n_tok; ++t)
            for (size_t r = 0; r < rows - kPackRows; ++r)
              ASSERT_FLOAT_EQ(part[t * ys + r], got[t * ys + kPackRows + r]);
        }
}

INSTANTIATE_TEST_SUITE_P(Levels, QuantDotSimd, ::testing::Values(SimdLevel::Avx2, SimdLevel::Avx512),
                         [](const auto& info) { return std::string(simd_level_name(info.param)); });

}  // namespace
}  // namespace ts
