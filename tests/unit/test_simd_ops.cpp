// Every SIMD table against the scalar reference, on random data with odd sizes and tails.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/quant_types.h"
#include "kernels/simd_ops.h"

namespace ts {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<uint16_t> random_halves(size_t n, uint32_t seed) {
  std::vector<uint16_t> h(n);
  const std::vector<float> f = random_floats(n, seed);
  for (size_t i = 0; i < n; ++i) h[i] = float_to_fp16(f[i]);
  return h;
}

std::vector<uint16_t> random_bf16(size_t n, uint32_t seed) {
  const std::vector<float> f = random_floats(n, seed);
  std::vector<uint16_t> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = float_to_bf16(f[i]);
  return h;
}

TEST(Bf16, ScalarRoundingIsNearestEvenAndKeepsNaN) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3F808000u)), 0x3F80);  // tie, even stays
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3F818000u)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3F808001u)), 0x3F81);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::bit_cast<float>(0x7F800001u)))));  // not inf
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
}

// The scalar GeGLU against GELU's tanh form as written (transformers' gelu_pytorch_tanh).
TEST(GeluMul, ScalarIsTheTanhApproximation) {
  std::vector<float> x{-12.0f, -3.0f, -1.0f, -0.25f, 0.0f, 0.5f, 1.0f, 2.5f, 12.0f}, up(x.size(), 2.0f);
  std::vector<float> y = x;
  scalar_ops().gelu_mul(y.data(), up.data(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i], gelu = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(y[i], 2 * gelu, 1e-6 * (1 + std::fabs(2 * gelu))) << "x = " << v;
  }
}

class SimdOpsTest : public ::testing::TestWithParam<SimdLevel> {
 protected:
  void SetUp() override {
    if (GetParam() > detected_simd_level()) GTEST_SKIP() << "CPU lacks " << simd_level_name(GetParam());
  }
  const SimdOps& simd() const { return simd_ops(GetParam()); }
  const SimdOps& ref() const { return scalar_ops(); }
};

// Sums of n products of N(0,1) values: float rounding differs by summation order only.
float tolerance(size_t n) { return 1e-5f * static_cast<float>(n) + 1e-5f; }

TEST_P(SimdOpsTest, DotMatchesScalar) {
  for (size_t n : {1u, 7u, 8u, 15u, 16u, 17u, 64u, 100u, 1000u}) {
    auto a = random_floats(n, 1), b = random_floats(n, 2);
    EXPECT_NEAR(simd().dot_f32(a.data(), b.data(), n), ref().dot_f32(a.data(), b.data(), n), tolerance(n))
        << n;
  }
}

TEST_P(SimdOpsTest, GemmMatchesScalarOnOddShapes) {
  for (size_t rows : {1u, 3u, 4u, 9u}) {
    for (size_t toks : {1u, 2u, 3u, 5u, 8u}) {
      for (size_t cols : {5u, 16u, 33u, 96u}) {
        auto w = random_floats(rows * cols, 3), x = random_floats(toks * (cols + 3), 4);
        const size_t ys = rows + 2;  // strides that are not the row count catch indexing slips
        std::vector<float> y1(toks * ys, 0.f), y2(toks * ys, 0.f);
        simd().gemm_f32(w.data(), rows, x.data(), cols + 3, toks, cols, y1.data(), ys);
        ref().gemm_f32(w.data(), rows, x.data(), cols + 3, toks, cols, y2.data(), ys);
        for (size_t i = 0; i < y1.size(); ++i)
          ASSERT_NEAR(y1[i], y2[i], tolerance(cols)) << rows << "x" << toks;
      }
    }
  }
}

TEST_P(SimdOpsTest, Bf16GemmAndRoundingMatchScalarOnOddShapes) {
  for (size_t n : {1u, 7u, 8u, 17u, 33u, 100u}) {
    std::vector<float> x = random_floats(n, 11);
    x[0] = std::numeric_limits<float>::quiet_NaN();
    std::vector<uint16_t> h1(n), h2(n);
    simd().f32_to_bf16(x.data(), h1.data(), n);
    ref().f32_to_bf16(x.data(), h2.data(), n);
    EXPECT_TRUE(std::isnan(bf16_to_float(h1[0])));
    EXPECT_EQ(std::vector<uint16_t>(h1.begin() + 1, h1.end()),
              std::vector<uint16_t>(h2.begin() + 1, h2.end()));
  }
  for (size_t rows : {1u, 3u, 4u, 9u}) {
    for (size_t toks : {1u, 2u, 3u, 5u, 8u}) {
      for (size_t cols : {5u, 31u, 32u, 33u, 64u, 97u}) {
        const auto w = random_bf16(rows * cols, 12), x = random_bf16(toks * (cols + 3), 13);
        const size_t ys = rows + 2;
        std::vector<float> y1(toks * ys, 0.f), y2(toks * ys, 0.f);
        simd().gemm_bf16(w.data(), rows, x.data(), cols + 3, toks, cols, y1.data(), ys);
        ref().gemm_bf16(w.data(), rows, x.data(), cols + 3, toks, cols, y2.data(), ys);
        for (size_t i = 0; i < y1.size(); ++i)
          ASSERT_NEAR(y1[i], y2[i], tolerance(cols)) << rows << "x" << toks << "x" << cols;
      }
    }
  }
}

TEST_P(SimdOpsTest, HalfPrecisionKernelsMatchScalar) {
  for (size_t n : {1u, 8u, 31u, 64u, 129u}) {
    auto k = random_halves(n, 5);
    auto q = random_floats(n, 6);
    EXPECT_NEAR(simd().dot_f16_f32(k.data(), q.data(), n), ref().dot_f16_f32(k.data(), q.data(), n),
                tolerance(n));
    auto y1 = random_floats(n, 7), y2 = y1;
    simd().axpy_f16(0.37f, k.data(), y1.data(), n);
    ref().axpy_f16(0.37f, k.data(), y2.data(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(y1[i], y2[i], 1e-6f);
    std::vector<uint16_t> h1(n), h2(n);
    simd().f32_to_f16(q.data(), h1.data(), n);
    ref().f32_to_f16(q.data(), h2.data(), n);
    EXPECT_EQ(h1, h2);  // round-to-nearest-even in both
  }
}

// compress_range against a plain filter (scalar) and the scalar (SIMD): keys on a few levels, so
// that many equal the bounds, with 0 and UINT32_MAX among them; out exactly n long (the ASan build
// catches a vector store past it); bounds empty, single, whole and unsigned-wide.
TEST_P(SimdOpsTest, CompressRangeMatchesAFilter) {
  std::mt19937 rng(21);
  const uint32_t levels[] = {0u, 5u, 6u, 7u, 0x7FFFFFFFu, 0x80000000u, 0x80000001u, UINT32_MAX};
  for (const size_t n : {0u, 1u, 7u, 8u, 9u, 15u, 16u, 17u, 31u, 100u, 1000u}) {
    std::vector<uint32_t> keys(n), values(n);
    for (size_t j = 0; j < n; ++j) keys[j] = levels[rng() % 8], values[j] = static_cast<uint32_t>(rng());
    for (const auto& [lo, hi] : {std::pair{6u, 6u},
                                 {5u, 0x80000000u},
                                 {0u, UINT32_MAX},
                                 {7u, 6u},
                                 {0x80000000u, UINT32_MAX},
                                 {0u, 0u},
                                 {0x7FFFFFFFu, 0x80000001u}}) {
      std::vector<uint32_t> want;
      size_t above = 0;
      for (size_t j = 0; j < n; ++j) {
        if (keys[j] >= lo && keys[j] <= hi) want.push_back(values[j]);
        above += keys[j] > hi;
      }
      for (const SimdOps* o : {&ref(), &simd()}) {
        std::vector<uint32_t> out(n);
        const RangeCount c = o->compress_range(keys.data(), values.data(), n, lo, hi, out.data());
        ASSERT_EQ(c.in_range, want.size()) << o->name << " n=" << n << " [" << lo << ", " << hi << "]";
        EXPECT_EQ(c.above, above) << o->name << " n=" << n << " [" << lo << ", " << hi << "]";
        out.resize(c.in_range);
        EXPECT_EQ(out, want) << o->name << " n=" << n << " [" << lo << ", " << hi << "]";
      }
    }
  }
}

// Masked gathers (a KV group's union of per-head lists): each query's result is its own rows'
// gather, by the scalar reference and the SIMD kernel, with and without numerators. The last
// query's rows: random as the others', none (l = 0, acc 0, numerators 0), or only from row 256 on
// (its first 256-row block of the other head dims' path masked out whole).
TEST_P(SimdOpsTest, MaskedGatherIsEachQuerysOwnGather) {
  std::mt19937 rng(17);
  for (size_t n_q : {2u, 3u, 7u}) {
    for (size_t n_rows : {1u, 19u, 333u}) {
      for (size_t hd : {40u, 64u}) {
        const size_t stride = 2 * hd + 8, n_cache = 400;
        auto k = random_halves(n_cache * stride, 22), v = random_halves(n_cache * stride, 23);
        auto q = random_floats(n_q * hd, 24);
        for (const int last : {0, 1, 2}) {
          std::vector<uint32_t> rows(n_rows);
          std::vector<uint8_t> masks(n_rows);
          for (size_t j = 0; j < n_rows; ++j) {
            rows[j] = static_cast<uint32_t>(rng() % n_cache);
            masks[j] = static_cast<uint8_t>(rng() & ((1u << n_q) - 1));
            if (last == 1 || (last == 2 && j < 256)) masks[j] &= static_cast<uint8_t>(~(1u << (n_q - 1)));
          }
          for (const SimdOps* ops : {&ref(), &simd()}) {
            for (bool numerators : {false, true}) {
              std::vector<float> m(n_q), l(n_q), acc(n_q * hd), p(numerators ? n_q * n_rows : 0);
              ops->attn_gather(q.data(), n_q, k.data(), v.data(), stride, rows.data(), masks.data(), n_rows,
                               hd, 0.125f, m.data(), l.data(), acc.data(), numerators ? p.data() : nullptr);
              for (size_t g = 0; g < n_q; ++g) {
                std::vector<uint32_t> own;
                for (size_t j = 0; j < n_rows; ++j)
                  if (masks[j] >> g & 1) own.push_back(rows[j]);
                std::vector<float> mg(1), lg(1), ag(hd), pg(own.size());
                if (!own.empty())
                  ref().attn_gather(&q[g * hd], 1, k.data(), v.data(), stride, own.data(), nullptr,
                                    own.size(), hd, 0.125f, mg.data(), lg.data(), ag.data(), pg.data());
                const std::string what = std::string(ops->name) + " n_q=" + std::to_string(n_q) +
                                         " rows=" + std::to_string(n_rows) + " hd=" + std::to_string(hd) +
                                         " last=" + std::to_string(last) + " g=" + std::to_string(g);
                if (own.empty()) {
                  EXPECT_EQ(l[g], 0.0f) << what;
                  EXPECT_EQ(m[g], -INFINITY) << what;
                  for (size_t x = 0; x < hd; ++x) ASSERT_EQ(acc[g * hd + x], 0.0f) << what;
                } else {
                  EXPECT_NEAR(m[g], mg[0], 1e-5f) << what;
                  EXPECT_NEAR(l[g] / lg[0], 1.0f, 1e-5f) << what;
                  for (size_t x = 0; x < hd; ++x)
                    ASSERT_NEAR(acc[g * hd + x] / l[g], ag[x] / lg[0], 1e-5f) << what;
                }
                if (!numerators) continue;
                for (size_t j = 0, o = 0; j < n_rows; ++j) {
                  const float want = masks[j] >> g & 1 ? pg[o++] : 0.0f;
                  ASSERT_NEAR(p[g * n_rows + j], want, 1e-5f * (1 + want)) << what << " j=" << j;
                }
              }
            }
          }
        }
      }
    }
  }
}

// dot_i8_pairs at its widest, every product at its largest: the integer sums must not wrap.
TEST_P(SimdOpsTest, IntegerPairDotsHoldTheirWidestSums) {
  const size_t n = kI8PairsMaxWidth, n_rows = 40, n_blocks = 3;
  for (const int sign : {1, -1}) {
    std::vector<int8_t> codes(n_blocks * n * kF16Block, 127);
    std::vector<int16_t> q(n, static_cast<int16_t>(sign * kQueryI16Max));
    const std::vector<float> scales(n_blocks * kF16Block, 0.5f);
    std::vector<float> y1(n_rows), y2(n_rows);
    simd().dot_i8_pairs(codes.data(), n * kF16Block, scales.data(), n_rows, q.data(), 0.25f, n, y1.data());
    ref().dot_i8_pairs(codes.data(), n * kF16Block, scales.data(), n_rows, q.data(), 0.25f, n, y2.data());
    const float want = static_cast<float>(sign * int64_t{127} * kQueryI16Max * int64_t(n)) * (0.5f * 0.25f);
    for (size_t j = 0; j < n_rows; ++j) {
      ASSERT_EQ(y2[j], want) << j;
      ASSERT_EQ(y1[j], want) << j;
    }
  }
  std::vector<int16_t> q16(4, 7);
  const std::vector<float> tiny = {1e-35f, 0.0f, -1e-36f, 0.0f}, nan = {1.0f, NAN, 2.0f, 0.0f};
  EXPECT_EQ(round_query_i16(tiny.data(), 4, q16.data()), 0.0f);  // too small to scale: scores 0
  EXPECT_EQ(q16, std::vector<int16_t>(4, 0));
  EXPECT_TRUE(std::isnan(round_query_i16(nan.data(), 4, q16.data())));  // NaN in, NaN scores out
}

TEST_P(SimdOpsTest, HalfPrecisionBlockDotsMatchScalar) {
  for (size_t n : {1u, 15u, 16u, 17u, 48u, 61u}) {
    // Whole runs of blocks, single blocks and a partial last block.
    for (size_t n_rows : {1u, 3u, 15u, 16u, 17u, 33u, 127u, 128u, 129u, 300u}) {
      const size_t n_blocks = (n_rows + kF16Block - 1) / kF16Block;
      const size_t block_stride = (n + 5) * kF16Block;  // blocks hold other heads' dimensions too
      auto k = random_halves(n_blocks * block_stride, 8);
      auto q = random_floats(n, 9);
      const uint16_t* first = k.data() + 2 * kF16Block;  // from the third dimension of each block
      std::vector<float> y1(n_rows + 1, -1.0f), y2(n_rows + 1, -1.0f);
      simd().dot_f16_blocks(first, block_stride, n_rows, q.data(), n, y1.data());
      ref().dot_f16_blocks(first, block_stride, n_rows, q.data(), n, y2.data());
      for (size_t j = 0; j < n_rows; ++j) {
        ASSERT_NEAR(y1[j], y2[j], tolerance(n)) << n << " " << n_rows << " " << j;
        double want = 0.0;  // in double from the half-precision values
        for (size_t x = 0; x < n; ++x)
          want += double(fp16_to_float(first[j / kF16Block * block_stride + x * kF16Block + j % kF16Block])) *
                  q[x];
        ASSERT_NEAR(y2[j], want, tolerance(n));
      }
      EXPECT_EQ(y1[n_rows], -1.0f);  // nothing written past the last row

      // int8 codes with a scale per row, dimensions in pairs, against a query rounded to integers:
      // exact integer sums, so the SIMD paths equal the scalar one bit for bit.
      const size_t n2 = n + n % 2;
      std::vector<int8_t> codes(n_blocks * block_stride);
      std::mt19937 rng(static_cast<uint32_t>(n * 1000 + n_rows));
      for (int8_t& c : codes) c = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
      const auto scales = random_floats(n_blocks * kF16Block, 10);
      const auto q2 = random_floats(n2, 11);
      std::vector<int16_t> q16(n2);
      const float q_scale = round_query_i16(q2.data(), n2, q16.data());
      for (size_t x = 0; x < n2; ++x) ASSERT_NEAR(q16[x] * q_scale, q2[x], q_scale / 2 * 1.0001f);
      const int8_t* first_code = codes.data() + 2 * kF16Block;  // from the second pair of dimensions
      std::fill(y1.begin(), y1.end(), -1.0f);
      simd().dot_i8_pairs(first_code, block_stride, scales.data(), n_rows, q16.data(), q_scale, n2,
                          y1.data());
      ref().dot_i8_pairs(first_code, block_stride, scales.data(), n_rows, q16.data(), q_scale, n2, y2.data());
      for (size_t j = 0; j < n_rows; ++j) {
        double want = 0.0;  // the float query against the codes, in double
        for (size_t x = 0; x < n2; ++x)
          want += double(first_code[j / kF16Block * block_stride + x / 2 * 2 * kF16Block + j % kF16Block * 2 +
                                    x % 2]) *
                  q2[x];
        want *= scales[j];
        ASSERT_NEAR(y2[j], want, 127 * n2 * std::fabs(scales[j]) * q_scale)
            << n2 << " " << n_rows << " " << j;
        ASSERT_EQ(y1[j], y2[j]) << n2 << " " << n_rows << " " << j;
      }
      EXPECT_EQ(y1[n_rows], -1.0f);
    }
  }
}

TEST_P(SimdOpsTest, AttentionChunkMatchesScalar) {
  // Head dims of 16-channel blocks (64, 128): two passes, 8 queries at a time (so 9 and 24, prefill
  // tiles, take several); 8, 36 and 40: the general path.
  for (size_t n_q : {1u, 2u, 3u, 5u, 7u, 8u, 9u, 24u}) {
    for (size_t n_keys : {1u, 17u, 300u}) {
      for (size_t hd : {8u, 36u, 40u, 64u, 128u}) {
        const size_t stride = 3 * hd + 8;  // rows hold other heads too
        auto k = random_halves(n_keys * stride, 8), v = random_halves(n_keys * stride, 9);
        auto q = random_floats(n_q * hd, 10);
        for (float& x : q) x *= 3.0f;  // scores of a few units, as a trained model's
        std::vector<float> m1(n_q), l1(n_q), a1(n_q * hd), m2(n_q), l2(n_q), a2(n_q * hd);
        simd().attn_chunk(q.data(), n_q, k.data() + 8, v.data() + 8, stride, n_keys, hd, 0.125f, m1.data(),
                          l1.data(), a1.data());
        ref().attn_chunk(q.data(), n_q, k.data() + 8, v.data() + 8, stride, n_keys, hd, 0.125f, m2.data(),
                         l2.data(), a2.data());
        for (size_t g = 0; g < n_q; ++g) {
          EXPECT_NEAR(m1[g], m2[g], 1e-5f);
          EXPECT_NEAR(l1[g] / l2[g], 1.0f, 1e-5f) << n_keys;
          for (size_t x = 0; x < hd; ++x) ASSERT_NEAR(a1[g * hd + x] / l1[g], a2[g * hd + x] / l2[g], 1e-5f);
        }
      }
    }
  }
}

TEST_P(SimdOpsTest, AttentionGatherMatchesScalarAndTheContiguousChunk) {
  std::mt19937 rng(11);
  for (size_t n_q : {1u, 3u, 7u, 9u}) {
    for (size_t n_rows : {1u, 19u, 333u}) {
      for (size_t hd : {36u, 40u, 64u, 128u}) {
        const size_t stride = 3 * hd + 8, n_cache = 400;
        auto k = random_halves(n_cache * stride, 12), v = random_halves(n_cache * stride, 13);
        auto q = random_floats(n_q * hd, 14);
        std::vector<uint32_t> rows(n_rows);
        for (auto& r : rows) r = static_cast<uint32_t>(rng() % n_cache);  // any order, repeats allowed
        std::vector<float> m1(n_q), l1(n_q), a1(n_q * hd), m2(n_q), l2(n_q), a2(n_q * hd);
        // With and without numerators (the watched path): the same result.
        for (bool numerators : {false, true}) {
          std::vector<float> p1(numerators ? n_q * n_rows : 0), p2(p1.size());
          simd().attn_gather(q.data(), n_q, k.data() + 8, v.data() + 8, stride, rows.data(), nullptr, n_rows,
                             hd, 0.125f, m1.data(), l1.data(), a1.data(), numerators ? p1.data() : nullptr);
          ref().attn_gather(q.data(), n_q, k.data() + 8, v.data() + 8, stride, rows.data(), nullptr, n_rows,
                            hd, 0.125f, m2.data(), l2.data(), a2.data(), numerators ? p2.data() : nullptr);
          for (size_t g = 0; g < n_q; ++g) {
            EXPECT_NEAR(m1[g], m2[g], 1e-5f);
            EXPECT_NEAR(l1[g] / l2[g], 1.0f, 1e-5f) << n_rows;
            for (size_t x = 0; x < hd; ++x)
              ASSERT_NEAR(a1[g * hd + x] / l1[g], a2[g * hd + x] / l2[g], 1e-5f);
          }
          for (size_t i = 0; i < p1.size(); ++i)
            ASSERT_NEAR(p1[i], p2[i], 1e-5f * (1 + p2[i])) << hd << " " << i;
          if (!numerators) continue;
          // No values (v null): the same m, l and numerators, acc untouched (null).
          std::vector<float> m3(n_q), l3(n_q), p3(p1.size());
          for (const SimdOps* ops : {&simd(), &ref()}) {
            ops->attn_gather(q.data(), n_q, k.data() + 8, nullptr, stride, rows.data(), nullptr, n_rows, hd,
                             0.125f, m3.data(), l3.data(), nullptr, p3.data());
            const std::vector<float>& p_full = ops == &ref() ? p2 : p1;
            const std::vector<float>& m_full = ops == &ref() ? m2 : m1;
            const std::vector<float>& l_full = ops == &ref() ? l2 : l1;
            for (size_t g = 0; g < n_q; ++g) {
              EXPECT_NEAR(m3[g], m_full[g], 1e-5f) << ops->name;
              EXPECT_NEAR(l3[g] / l_full[g], 1.0f, 1e-6f) << ops->name;
            }
            for (size_t i = 0; i < p3.size(); ++i)
              ASSERT_NEAR(p3[i], p_full[i], 1e-5f * (1 + p_full[i])) << ops->name << " " << hd;
          }
        }
        // Gathering rows 0..n-1 is the contiguous chunk, bit for bit.
        std::vector<uint32_t> first(n_rows);
        for (size_t j = 0; j < n_rows; ++j) first[j] = static_cast<uint32_t>(j);
        simd().attn_gather(q.data(), n_q, k.data(), v.data(), stride, first.data(), nullptr, n_rows, hd,
                           0.125f, m1.data(), l1.data(), a1.data(), nullptr);
        simd().attn_chunk(q.data(), n_q, k.data(), v.data(), stride, n_rows, hd, 0.125f, m2.data(), l2.data(),
                          a2.data());
        EXPECT_EQ(m1, m2);
        EXPECT_EQ(l1, l2);
        EXPECT_EQ(a1, a2);
      }
    }
  }
}

TEST_P(SimdOpsTest, PerTokenOpsMatchScalar) {
  for (size_t n : {3u, 16u, 64u, 70u, 576u}) {
    const auto x = random_floats(n, 11), w = random_floats(n, 12);
    std::vector<float> y1(n), y2(n);
    simd().rms_norm(x.data(), w.data(), y1.data(), n, 1e-5f);
    ref().rms_norm(x.data(), w.data(), y2.data(), n, 1e-5f);
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(y1[i], y2[i], 1e-5f * (1 + std::fabs(y2[i])));
    auto g1 = random_floats(n, 13), g2 = g1;
    simd().silu_mul(g1.data(), w.data(), n);
    ref().silu_mul(g2.data(), w.data(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(g1[i], g2[i], 1e-5f * (1 + std::fabs(g2[i])));
    auto e1 = random_floats(n, 15), e2 = e1;
    for (auto* v : {&e1, &e2})
      for (float& e : *v) e *= 6.0f;  // through both tails of the tanh
    simd().gelu_mul(e1.data(), w.data(), n);
    ref().gelu_mul(e2.data(), w.data(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(e1[i], e2[i], 1e-5f * (1 + std::fabs(e2[i])));
    auto s1 = random_floats(n, 14), s2 = s1;
    for (auto* v : {&s1, &s2})
      for (float& e : *v) e *= 10.0f;  // spread the logits over a wide range of exp()
    simd().softmax(s1.data(), n);
    ref().softmax(s2.data(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(s1[i], s2[i], 1e-6f + 1e-5f * s2[i]);
  }
}

TEST_P(SimdOpsTest, RopeMatchesScalarInBothLayouts) {
  for (size_t rot : {2u, 8u, 32u, 64u, 96u}) {
    for (bool neox : {false, true}) {
      const auto c = random_floats(rot, 15), s = random_floats(rot, 16);
      auto x1 = random_floats(rot + 5, 17), x2 = x1;
      simd().rope(x1.data(), c.data(), s.data(), rot, neox);
      ref().rope(x2.data(), c.data(), s.data(), rot, neox);
      for (size_t i = 0; i < x1.size(); ++i) ASSERT_NEAR(x1[i], x2[i], 1e-5f) << rot << (neox ? " neox" : "");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, SimdOpsTest, ::testing::Values(SimdLevel::Avx2, SimdLevel::Avx512),
                         [](const auto& info) { return std::string(simd_level_name(info.param)); });

}  // namespace
}  // namespace ts
