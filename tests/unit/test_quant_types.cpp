// Quant traits and scalar dequantization. The fixtures in tests/fixtures/quant come from the gguf Python
// package (tools/make_quant_fixtures.py); our results must match them bit for bit, because both compute
// every value with the same float32 operations in the same order.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_types.h"
#include "test_paths.h"

namespace {

using ts::QuantType;

std::vector<uint8_t> read_fixture(const std::string& name) {
  std::ifstream f(ts::source_path("tests/fixtures/quant/") + name, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

uint32_t u32_at(const std::vector<uint8_t>& b, size_t pos) {
  uint32_t v;
  std::memcpy(&v, b.data() + pos, 4);
  return v;
}

// An independent fp16 decoder (arithmetic instead of bit moves) for the exhaustive check.
float fp16_by_arithmetic(uint16_t h) {
  const int exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  const float sign = (h & 0x8000) ? -1.0f : 1.0f;
  if (exp == 0x1F) return mant ? std::numeric_limits<float>::quiet_NaN() : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -24);
  return sign * std::ldexp(static_cast<float>(mant + 1024), exp - 25);
}

TEST(QuantTypes, TraitsTableMatchesGguf) {
  struct Row {
    uint32_t id;
    const char* name;
    size_t elems, bytes;
  };
  const Row rows[] = {{0, "F32", 1, 4},       {1, "F16", 1, 2},       {2, "Q4_0", 32, 18},
                      {3, "Q4_1", 32, 20},    {6, "Q5_0", 32, 22},    {7, "Q5_1", 32, 24},
                      {8, "Q8_0", 32, 34},    {10, "Q2_K", 256, 84},  {11, "Q3_K", 256, 110},
                      {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176}, {14, "Q6_K", 256, 210},
                      {30, "BF16", 1, 2}};
  for (const Row& r : rows) {
    const auto t = ts::quant_traits(r.id);
    ASSERT_TRUE(t.has_value()) << r.name;
    EXPECT_EQ(static_cast<uint32_t>(t->type), r.id);
    EXPECT_EQ(t->name, r.name);
    EXPECT_EQ(t->block_elems, r.elems) << r.name;
    EXPECT_EQ(t->block_bytes, r.bytes) << r.name;
    EXPECT_NE(t->to_float, nullptr);
    EXPECT_EQ(&ts::quant_traits(t->type), &ts::quant_traits(t->type));
    EXPECT_EQ(ts::quant_traits(t->type).name, r.name);
  }
  for (uint32_t id : {4u, 5u, 9u, 15u, 16u, 24u, 28u, 31u, 39u, 1000u, 0xFFFFFFFFu}) {
    EXPECT_FALSE(ts::quant_traits(id).has_value()) << id;
  }
  EXPECT_THROW(ts::quant_traits(static_cast<QuantType>(9)), ts::Error);
  EXPECT_EQ(ts::row_bytes(ts::quant_traits(QuantType::Q4_K), 512), 288u);
}

TEST(QuantTypes, Fp16ToFloatIsExactForEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float got = ts::fp16_to_float(static_cast<uint16_t>(h));
    const float want = fp16_by_arithmetic(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << h;
      const uint32_t bits = std::bit_cast<uint32_t>(got);
      EXPECT_EQ(bits & 0x00400000u, 0x00400000u) << "NaN must come out quiet: " << h;
      EXPECT_EQ(bits >> 31, h >> 15) << h;
      EXPECT_EQ((bits >> 13) & 0x1FFu, h & 0x1FFu) << "payload kept: " << h;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << h;  // also -0
    }
  }
  EXPECT_EQ(ts::fp16_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(ts::fp16_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(ts::fp16_to_float(0xFC00), -INFINITY);
}

TEST(QuantTypes, FloatToFp16RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) continue;  // NaN: checked below
    ASSERT_EQ(ts::float_to_fp16(ts::fp16_to_float(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(QuantTypes, FloatToFp16RoundsToNearestEven) {
  EXPECT_EQ(ts::float_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(ts::float_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie: down to even
  EXPECT_EQ(ts::float_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie: up to even
  EXPECT_EQ(ts::float_to_fp16(65519.0f), 0x7BFF);
  EXPECT_EQ(ts::float_to_fp16(65520.0f), 0x7C00);  // tie with 65536: rounds to Inf
  EXPECT_EQ(ts::float_to_fp16(-1e10f), 0xFC00);
  EXPECT_EQ(ts::float_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie between 0 and 2^-24
  EXPECT_EQ(ts::float_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(ts::float_to_fp16(std::ldexp(3.0f, -25)), 0x0002);     // tie between 1 and 2 quanta: even
  EXPECT_EQ(ts::float_to_fp16(std::ldexp(1023.5f, -24)), 0x0400);  // rounds up into the normals
  EXPECT_EQ(ts::float_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(ts::float_to_fp16(1e-30f), 0x0000);
  EXPECT_EQ(ts::float_to_fp16(std::numeric_limits<float>::denorm_min()), 0x0000);
  // NaNs stay NaN (never Inf), even when the payload is only in bits that fp16 drops.
  for (uint32_t bits : {0x7FC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu}) {
    const uint16_t h = ts::float_to_fp16(std::bit_cast<float>(bits));
    EXPECT_EQ(h & 0x7C00, 0x7C00) << bits;
    EXPECT_NE(h & 0x3FF, 0) << bits;
    EXPECT_EQ(h >> 15, bits >> 31) << bits;
  }
}

TEST(QuantTypes, FloatToFp16MatchesNumpy) {
  const std::vector<uint8_t> b = read_fixture("f32_to_f16.bin");
  ASSERT_GE(b.size(), 8u);
  ASSERT_EQ(std::memcmp(b.data(), "TSHF", 4), 0);
  const uint32_t n = u32_at(b, 4);
  ASSERT_EQ(b.size(), 8u + n * 6u);
  for (uint32_t i = 0; i < n; ++i) {
    float x;
    uint16_t want;
    std::memcpy(&x, b.data() + 8 + 4 * i, 4);
    std::memcpy(&want, b.data() + 8 + 4 * n + 2 * i, 2);
    ASSERT_EQ(ts::float_to_fp16(x), want) << "x=" << x << " bits=" << std::bit_cast<uint32_t>(x);
  }
}

#if defined(__FLT16_MAX__) && !defined(__clang__)
// A second, independent reference: the compiler's _Float16 conversion, over a strided sweep of all floats.
TEST(QuantTypes, FloatToFp16MatchesCompilerFloat16) {
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFu; bits += 40503) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(bits));
    if (std::isnan(x)) continue;
    const auto want = std::bit_cast<uint16_t>(static_cast<_Float16>(x));
    ASSERT_EQ(ts::float_to_fp16(x), want) << "bits=" << bits;
  }
}
#endif

TEST(QuantTypes, Bf16ToFloat) {
  EXPECT_EQ(ts::bf16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(ts::bf16_to_float(0xC040), -3.0f);
  EXPECT_EQ(ts::bf16_to_float(0x0001), std::bit_cast<float>(0x00010000u));  // subnormal
  EXPECT_EQ(ts::bf16_to_float(0x7F80), INFINITY);
  EXPECT_EQ(std::bit_cast<uint32_t>(ts::bf16_to_float(0x7FC1)), 0x7FC10000u);  // NaN bits kept
}

TEST(QuantTypes, F32RowIsACopy) {
  const float src[3] = {1.5f, -0.0f, 3e38f};
  float dst[3];
  ts::quant_traits(QuantType::F32).to_float(src, dst, 3);
  EXPECT_EQ(std::memcmp(src, dst, sizeof src), 0);
}

class QuantFixture : public testing::TestWithParam<const char*> {};

// Bit-exact against the gguf package, both at an aligned address and at an odd one (GGUF allows
// alignment 1, so kernels must not assume aligned blocks).
TEST_P(QuantFixture, MatchesGgufPythonBitForBit) {
  const std::vector<uint8_t> b = read_fixture(std::string(GetParam()) + ".bin");
  ASSERT_GE(b.size(), 20u) << "missing fixture; run tools/make_quant_fixtures.py";
  ASSERT_EQ(std::memcmp(b.data(), "TSQF", 4), 0);
  const auto traits = ts::quant_traits(u32_at(b, 4));
  ASSERT_TRUE(traits.has_value());
  EXPECT_EQ(traits->name, GetParam());
  const uint32_t n_blocks = u32_at(b, 8);
  ASSERT_EQ(u32_at(b, 12), traits->block_bytes);
  ASSERT_EQ(u32_at(b, 16), traits->block_elems);
  const size_t n = n_blocks * traits->block_elems, raw_bytes = n_blocks * traits->block_bytes;
  ASSERT_EQ(b.size(), 20 + raw_bytes + 4 * n);
  const uint8_t* raw = b.data() + 20;
  const uint8_t* want = raw + raw_bytes;

  for (size_t misalign : {0, 1}) {
    std::vector<uint8_t> src(raw_bytes + misalign);
    std::memcpy(src.data() + misalign, raw, raw_bytes);
    std::vector<float> got(n);
    traits->to_float(src.data() + misalign, got.data(), n);
    for (size_t i = 0; i < n; ++i) {
      float w;
      std::memcpy(&w, want + 4 * i, 4);
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(w))
          << GetParam() << " element " << i << ": got " << got[i] << ", want " << w;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantFixture,
                         testing::Values("F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K",
                                         "Q3_K", "Q4_K", "Q5_K", "Q6_K"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

// Hand-checked values, so a wrong layout cannot hide behind a wrong fixture generator.
TEST(QuantTypes, Q4_0AndQ8_0ByHand) {
  ts::BlockQ4_0 q4{};
  q4.d = ts::float_to_fp16(0.5f);
  q4.qs[0] = 0x2F;  // element 0: 15 - 8 = 7; element 16: 2 - 8 = -6
  float out[32];
  ts::quant_traits(QuantType::Q4_0).to_float(&q4, out, 32);
  EXPECT_EQ(out[0], 3.5f);
  EXPECT_EQ(out[16], -3.0f);
  EXPECT_EQ(out[1], -4.0f);  // nibble 0 -> -8

  ts::BlockQ8_0 q8{};
  q8.d = ts::float_to_fp16(0.25f);
  q8.qs[31] = -128;
  ts::quant_traits(QuantType::Q8_0).to_float(&q8, out, 32);
  EXPECT_EQ(out[31], -32.0f);
  EXPECT_EQ(out[0], 0.0f);
}

TEST(QuantTypes, Q6_KByHand) {
  ts::BlockQ6_K b{};
  b.d = ts::float_to_fp16(1.0f);
  for (auto& s : b.scales) s = 1;
  b.scales[15] = -2;
  // Element 255 = second half, quarter 3, lane 31: high nibble of ql[64 + 32 + 31], bits 6..7 of qh[32 + 31].
  b.ql[127] = 0xF0;
  b.qh[63] = 0xC0;
  float out[256];
  ts::quant_traits(QuantType::Q6_K).to_float(&b, out, 256);
  EXPECT_EQ(out[255], -2.0f * (63 - 32));
  EXPECT_EQ(out[0], -32.0f);
}

}  // namespace
