// Integer dot products: the scalar reference against dequantized float math, and every SIMD
// table against the scalar reference, on random blocks with odd block counts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/packed_rows.h"
#include "kernels/quant_blocks.h"
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

struct Activations {
  std::vector<float> x;
  std::vector<int8_t> qs;
  std::vector<float> d, s;
  Q8Row row() const { return {qs.data(), d.data(), s.data()}; }
};

Activations quantized(const SimdOps& k, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  Activations a;
  a.x.resize(n);
  for (float& v : a.x) v = dist(rng);
  a.qs.resize(n);
  a.d.resize(n / kQ8Block);
  a.s.resize(n / kQ8Block);
  k.quantize_q8(a.x.data(), n, a.qs.data(), a.d.data(), a.s.data());
  return a;
}

// Every block type with an integer dot product.
const QuantType kTypes[] = {QuantType::Q4_0, QuantType::Q4_1, QuantType::Q5_0, QuantType::Q5_1,
                            QuantType::Q8_0, QuantType::Q2_K, QuantType::Q3_K, QuantType::Q4_K,
                            QuantType::Q5_K, QuantType::Q6_K};

// Activation blocks (of 32) per weight block.
size_t slices(QuantType type) { return quant_traits(type).block_elems / kQ8Block; }

TEST(QuantDot, EveryBlockTypeHasAnIntegerDot) {
  for (QuantType type : kTypes) EXPECT_TRUE(has_q8_dot(type)) << quant_traits(type).name;
  for (QuantType type : {QuantType::F32, QuantType::F16, QuantType::BF16}) EXPECT_FALSE(has_q8_dot(type));
}

TEST(QuantDot, ScalarQuantizationRoundTripsWithinHalfAStep) {
  const Activations a = quantized(scalar_ops(), 96, 11);
  for (size_t i = 0; i < a.x.size(); ++i) {
    const float step = a.d[i / kQ8Block];
    EXPECT_NEAR(a.qs[i] * step, a.x[i], 0.5f * step + 1e-6f);
  }
  for (size_t b = 0; b < a.d.size(); ++b) {
    int sum = 0;
    for (size_t i = 0; i < kQ8Block; ++i) sum += a.qs[b * kQ8Block + i];
    EXPECT_FLOAT_EQ(a.s[b], a.d[b] * static_cast<float>(sum));
  }
}

// The reference: weights through the (ggml-exact) to_float conversion, activations as q * d.
TEST(QuantDot, ScalarDotEqualsDequantizedFloatDot) {
  for (QuantType type : kTypes) {
    for (uint32_t seed : {21u, 22u, 23u}) {
      const size_t w_blocks = 7, n = w_blocks * quant_traits(type).block_elems;
      const auto w = random_blocks(type, w_blocks, seed);
      const Activations a = quantized(scalar_ops(), n, seed + 100);
      std::vector<float> wf(n);
      quant_traits(type).to_float(w.data(), wf.data(), n);
      double expect = 0.0, magnitude = 0.0;
      for (size_t i = 0; i < n; ++i) {
        expect += double(wf[i]) * a.qs[i] * a.d[i / kQ8Block];
        magnitude += std::fabs(double(wf[i]) * a.qs[i] * a.d[i / kQ8Block]);
      }
      EXPECT_NEAR(scalar_ops().dot_q8(type, w.data(), a.row(), n / kQ8Block), expect, 1e-5 * (1 + magnitude))
          << quant_traits(type).name << " seed " << seed;
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
    const Activations ref = quantized(scalar_ops(), n, 5), got = quantized(simd_ops(GetParam()), n, 5);
    EXPECT_EQ(got.qs, ref.qs);
    EXPECT_EQ(got.d, ref.d);
    for (size_t b = 0; b < ref.s.size(); ++b) EXPECT_FLOAT_EQ(got.s[b], ref.s[b]);
  }
}

TEST_P(QuantDotSimd, DotsMatchScalar) {
  const SimdOps& k = simd_ops(GetParam());
  for (QuantType type : kTypes) {
    for (size_t w_blocks : {1u, 2u, 3u, 18u, 49u}) {
      const size_t n_blocks = w_blocks * slices(type);
      const auto w = random_blocks(type, w_blocks, 31 + static_cast<uint32_t>(w_blocks));
      const Activations a = quantized(scalar_ops(), n_blocks * kQ8Block, 32);
      const float ref = scalar_ops().dot_q8(type, w.data(), a.row(), n_blocks);
      const float got = k.dot_q8(type, w.data(), a.row(), n_blocks);
      // Integer block sums are exact; only the float accumulation order differs.
      EXPECT_NEAR(got, ref, 1e-5f * (1.0f + std::fabs(ref)) * static_cast<float>(n_blocks))
          << quant_traits(type).name << " blocks=" << w_blocks;
    }
  }
}

TEST_P(QuantDotSimd, BlockedGemmMatchesScalarOnOddShapes) {
  const SimdOps& k = simd_ops(GetParam());
  for (QuantType type : kTypes) {
    for (size_t w_blocks : {1u, 2u, 3u, 18u}) {
      const size_t n_blocks = w_blocks * slices(type), cols = n_blocks * kQ8Block, rows = 7, n_tok = 5,
                   t0 = 1;
      const size_t stride = quant_traits(type).block_bytes * w_blocks;
      const auto w = random_blocks(type, rows * w_blocks, 41);
      Q8Activations x;
      x.n_tok = n_tok + t0;
      x.cols = cols;
      const Activations a = quantized(scalar_ops(), x.n_tok * cols, 42);
      x.qs = a.qs;
      x.d = a.d;
      x.s = a.s;
      const size_t ys = rows + 3;
      std::vector<float> ref(n_tok * ys, -1.0f), got(n_tok * ys, -1.0f);
      scalar_ops().gemm_q8(type, w.data(), stride, rows, x, t0, n_tok, ref.data(), ys);
      k.gemm_q8(type, w.data(), stride, rows, x, t0, n_tok, got.data(), ys);
      for (size_t i = 0; i < ref.size(); ++i)
        ASSERT_NEAR(got[i], ref[i], 1e-5f * (1.0f + std::fabs(ref[i])) * static_cast<float>(n_blocks))
            << quant_traits(type).name << " blocks=" << w_blocks << " at " << i;
    }
  }
}

// Row-major weights and activations of one gemm shape, with the packed copy of the weights.
struct GemmCase {
  QuantType type;
  size_t rows, n_blocks, n_tok, t0;
  std::vector<uint8_t> w, packed;
  Q8Activations x;
  size_t stride() const { return quant_traits(type).block_bytes * n_blocks; }
  size_t cols() const { return n_blocks * kQ8Block; }
};

GemmCase gemm_case(QuantType type, size_t rows, size_t n_blocks, size_t n_tok, uint32_t seed) {
  GemmCase c{type, rows, n_blocks, n_tok, 1, random_blocks(type, rows * n_blocks, seed), {}, {}};
  c.packed.resize(packed_bytes(type, rows, c.cols()));
  pack_rows(type, c.w.data(), rows, c.cols(), c.packed.data());
  c.x.n_tok = n_tok + c.t0;
  c.x.cols = c.cols();
  const Activations a = quantized(scalar_ops(), c.x.n_tok * c.cols(), seed + 1);
  c.x.qs = a.qs;
  c.x.d = a.d;
  c.x.s = a.s;
  return c;
}

const QuantType kPackedTypes[] = {QuantType::Q4_0, QuantType::Q4_1, QuantType::Q8_0};

// Row counts around the 16-row group (a padded last group), block counts with odd tails, token
// counts below and above the SIMD token tiles.
TEST(PackedGemm, ScalarPackedEqualsRowMajorReference) {
  for (QuantType type : kPackedTypes)
    for (size_t rows : {1u, 7u, 16u, 35u})
      for (size_t n_blocks : {1u, 3u, 18u}) {
        GemmCase c = gemm_case(type, rows, n_blocks, 3, 51);
        const size_t ys = rows + 2;
        std::vector<float> ref(c.n_tok * ys, -1.0f), got(c.n_tok * ys, -1.0f);
        scalar_ops().gemm_q8(type, c.w.data(), c.stride(), rows, c.x, c.t0, c.n_tok, ref.data(), ys);
        scalar_ops().gemm_packed(type, c.packed.data(), rows, c.cols(), c.x, c.t0, c.n_tok, got.data(), ys);
        for (size_t i = 0; i < ref.size(); ++i)
          ASSERT_NEAR(got[i], ref[i], 1e-5f * (1.0f + std::fabs(ref[i])) * static_cast<float>(n_blocks))
              << quant_traits(type).name << " rows=" << rows << " blocks=" << n_blocks << " at " << i;
      }
}

TEST_P(QuantDotSimd, PackedGemmMatchesScalar) {
  const SimdOps& k = simd_ops(GetParam());
  for (QuantType type : kPackedTypes)
    for (size_t rows : {5u, 16u, 35u})
      for (size_t n_blocks : {1u, 3u, 18u})
        for (size_t n_tok : {1u, 2u, 9u, 19u}) {
          GemmCase c = gemm_case(type, rows, n_blocks, n_tok, 61);
          const size_t ys = rows + 3;
          std::vector<float> ref(n_tok * ys, -1.0f), got(n_tok * ys, -1.0f);
          scalar_ops().gemm_packed(type, c.packed.data(), rows, c.cols(), c.x, c.t0, n_tok, ref.data(), ys);
          k.gemm_packed(type, c.packed.data(), rows, c.cols(), c.x, c.t0, n_tok, got.data(), ys);
          for (size_t i = 0; i < ref.size(); ++i)
            ASSERT_NEAR(got[i], ref[i], 1e-5f * (1.0f + std::fabs(ref[i])) * static_cast<float>(n_blocks))
                << quant_traits(type).name << " rows=" << rows << " blocks=" << n_blocks
                << " tokens=" << n_tok << " at " << i;
          // A call on the later groups only (as the threads of matmul split them) computes their rows.
          if (rows <= kPackRows) continue;
          std::vector<float> part(n_tok * ys, -1.0f);
          k.gemm_packed(type, c.packed.data() + packed_group_bytes(type, c.cols()), rows - kPackRows,
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
