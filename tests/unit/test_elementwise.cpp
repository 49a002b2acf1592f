// The scalar reference of the per-token operations against their definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/simd_ops.h"

namespace ts {
namespace {

const SimdOps& ref() { return scalar_ops(); }

TEST(Elementwise, RmsNormHasUnitRmsTimesWeight) {
  std::vector<float> x{1, -2, 3, -4}, w{1, 1, 2, 2}, y(4);
  ref().rms_norm(x.data(), w.data(), y.data(), 4, 0.0f);
  const float rms = std::sqrt((1 + 4 + 9 + 16) / 4.0f);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], x[i] / rms * w[i], 1e-6);
}

TEST(Elementwise, SoftmaxIsStableForLargeLogits) {
  std::vector<float> x{1000.0f, 1000.0f, -INFINITY};
  ref().softmax(x.data(), 3);
  EXPECT_FLOAT_EQ(x[0], 0.5f);
  EXPECT_FLOAT_EQ(x[1], 0.5f);
  EXPECT_FLOAT_EQ(x[2], 0.0f);
}

TEST(Elementwise, SiluMul) {
  std::vector<float> g{0.0f, 2.0f}, u{5.0f, 3.0f};
  ref().silu_mul(g.data(), u.data(), 2);
  EXPECT_FLOAT_EQ(g[0], 0.0f);
  EXPECT_NEAR(g[1], 2.0f / (1.0f + std::exp(-2.0f)) * 3.0f, 1e-6);
}

TEST(Elementwise, RopeLayoutsRotateTheRightPairs) {
  const std::vector<float> inv_freq{1.0f, 0.5f};
  std::vector<float> c(4), s(4);
  rope_tables(0.7f, inv_freq.data(), 4, RopeLayout::Interleaved, c.data(), s.data());
  std::vector<float> a{1, 2, 3, 4, 9};  // the 5th dim is past rot_dim and must not move
  ref().rope(a.data(), c.data(), s.data(), 4, false);
  EXPECT_NEAR(a[0], 1 * std::cos(0.7f) - 2 * std::sin(0.7f), 1e-6);
  EXPECT_NEAR(a[1], 1 * std::sin(0.7f) + 2 * std::cos(0.7f), 1e-6);
  EXPECT_NEAR(a[2], 3 * std::cos(0.35f) - 4 * std::sin(0.35f), 1e-6);
  EXPECT_EQ(a[4], 9);
  rope_tables(0.7f, inv_freq.data(), 4, RopeLayout::Neox, c.data(), s.data());
  std::vector<float> b{1, 2, 3, 4};
  ref().rope(b.data(), c.data(), s.data(), 4, true);
  EXPECT_NEAR(b[0], 1 * std::cos(0.7f) - 3 * std::sin(0.7f), 1e-6);
  EXPECT_NEAR(b[2], 1 * std::sin(0.7f) + 3 * std::cos(0.7f), 1e-6);
  EXPECT_NEAR(b[1], 2 * std::cos(0.35f) - 4 * std::sin(0.35f), 1e-6);
}

TEST(Elementwise, RopeKeepsAnglesExactAtLargePositions) {
  const std::vector<float> inv_freq{1.0f};
  std::vector<float> c(2), s(2);
  rope_tables(100000.0f, inv_freq.data(), 2, RopeLayout::Interleaved, c.data(), s.data());
  EXPECT_NEAR(c[0], std::cos(100000.0), 1e-6);
  EXPECT_NEAR(s[1], std::sin(100000.0), 1e-6);
}

}  // namespace
}  // namespace ts
