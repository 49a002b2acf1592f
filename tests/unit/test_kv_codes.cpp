// Low-bit KV codes: packing round trip, RTN error bound, and the fused dequantize-and-dot kernels
// of every SIMD table against the scalar reference (odd row counts, tails past the vector width).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/kv_codes.h"
#include "kernels/simd_ops.h"

namespace ts {
namespace {

std::vector<uint8_t> random_codes(size_t n, unsigned bits, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> c(n);
  for (auto& x : c) x = static_cast<uint8_t>(rng() & code_max(bits));
  return c;
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(KvCodes, PackRoundTrip) {
  for (unsigned bits : {8u, 4u, 2u})
    for (size_t n : {4u, 8u, 12u, 32u, 64u, 100u}) {
      const auto codes = random_codes(n, bits, 7);
      std::vector<uint8_t> packed(code_bytes(bits, n));
      pack_codes(codes.data(), n, bits, packed.data());
      for (size_t j = 0; j < n; ++j)
        ASSERT_EQ(code_at(packed.data(), bits, n, j), codes[j]) << bits << " " << n;
    }
}

TEST(KvCodes, RoundToNearestWithinHalfAStep) {
  const auto x = random_floats(256, 3);
  const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
  for (unsigned bits : {8u, 4u, 2u}) {
    const CodeRange r = code_range(*lo, *hi, bits);
    EXPECT_FLOAT_EQ(r.scale, (*hi - *lo) / float(code_max(bits)));
    for (float v : x) {
      const float back = r.scale * float(code_of(v, r, bits)) + r.min;
      ASSERT_LE(std::abs(back - v), r.scale * 0.5f * (1 + 1e-5f) + 1e-6f) << bits;
    }
    EXPECT_EQ(code_of(*lo, r, bits), 0u);
    EXPECT_EQ(code_of(*hi, r, bits), code_max(bits));
  }
  EXPECT_EQ(code_of(1.5f, code_range(1.5f, 1.5f, 4), 4), 0u);  // constant group: scale 0
}

class KvCodesSimdTest : public ::testing::TestWithParam<SimdLevel> {
 protected:
  void SetUp() override {
    if (GetParam() > detected_simd_level()) GTEST_SKIP() << "CPU lacks " << simd_level_name(GetParam());
  }
};

TEST_P(KvCodesSimdTest, FusedKernelsMatchScalar) {
  const SimdOps& simd = simd_ops(GetParam());
  const SimdOps& ref = scalar_ops();
  for (unsigned bits : {8u, 4u, 2u})
    for (size_t n : {4u, 8u, 16u, 32u, 36u, 64u, 128u, 132u, 200u}) {
      if (n % (8 / bits)) continue;
      const auto codes = random_codes(n, bits, 11);
      std::vector<uint8_t> packed(code_bytes(bits, n));
      pack_codes(codes.data(), n, bits, packed.data());
      for (size_t rows : {1u, 3u, 4u, 6u}) {
        const size_t stride = n + 5;
        const auto w = random_floats(rows * stride, 5), a = random_floats(rows, 6);
        std::vector<float> d1(rows), d2(rows);
        simd.dot_codes(packed.data(), bits, n, w.data(), stride, rows, d1.data());
        ref.dot_codes(packed.data(), bits, n, w.data(), stride, rows, d2.data());
        for (size_t g = 0; g < rows; ++g) {
          float expect = 0.0f;
          for (size_t j = 0; j < n; ++j) expect += w[g * stride + j] * float(codes[j]);
          ASSERT_NEAR(d2[g], expect, 1e-3f * float(n));
          ASSERT_NEAR(d1[g], d2[g], 1e-4f * float(n) * float(code_max(bits))) << bits << " n=" << n;
        }
        auto y1 = random_floats(rows * stride, 8), y2 = y1;
        simd.axpy_codes(packed.data(), bits, n, a.data(), rows, y1.data(), stride);
        ref.axpy_codes(packed.data(), bits, n, a.data(), rows, y2.data(), stride);
        for (size_t i = 0; i < y1.size(); ++i) ASSERT_NEAR(y1[i], y2[i], 1e-4f) << bits << " n=" << n;
        for (size_t g = 0; g < rows; ++g)  // the stride gap is untouched
          for (size_t j = n; j < stride; ++j) ASSERT_EQ(y1[g * stride + j], y2[g * stride + j]);
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Isa, KvCodesSimdTest, ::testing::Values(SimdLevel::Avx2, SimdLevel::Avx512),
                         [](const auto& info) { return std::string(simd_level_name(info.param)); });

}  // namespace
}  // namespace ts
