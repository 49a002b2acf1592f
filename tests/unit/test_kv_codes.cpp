// Low-bit KV codes: packing round trip, RTN error bound, row decoding, and attention over coded
// rows (the scalar kernel against plain softmax attention, every SIMD table against the scalar one).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

// A run of n_keys coded rows of one head cut into `sizes` segments, each row with its own ranges
// (range_stride = segments) unless shared; the unpacked codes are kept for the expected values.
struct CodedRun {
  std::vector<CodeSegment> segments;
  std::vector<uint8_t> packed, codes;  // codes: [row][channel]
  std::vector<CodeRange> ranges;
  CodedRows rows;

  CodedRun(std::vector<uint32_t> sizes, unsigned bits, size_t n_keys, bool shared_ranges, uint32_t seed) {
    uint32_t off = 0;
    for (uint32_t sz : sizes) {
      segments.push_back({off, sz, static_cast<uint32_t>(segments.size())});
      off += sz;
    }
    const size_t hd = off, row_bytes = code_bytes(bits, hd) + 3;  // rows hold other bytes too
    codes = random_codes(n_keys * hd, bits, seed);
    packed.assign(n_keys * row_bytes, 0xA5);
    for (size_t j = 0; j < n_keys; ++j)
      for (const CodeSegment& s : segments)
        pack_codes(&codes[j * hd + s.offset], s.size, bits,
                   &packed[j * row_bytes + code_bytes(bits, s.offset)]);
    const auto f = random_floats(2 * n_keys * segments.size(), seed + 1);
    for (size_t i = 0; i < n_keys * segments.size(); ++i)  // values of order 1, like keys and values
      ranges.push_back({(0.5f + 0.5f * std::abs(f[2 * i])) / float(code_max(bits)), f[2 * i + 1]});
    rows = {packed.data(),
            row_bytes,
            bits,
            segments.data(),
            segments.size(),
            ranges.data(),
            shared_ranges ? 0 : segments.size()};
  }
  size_t head_dim() const { return segments.back().offset + segments.back().size; }
  CodeRange range(size_t j, size_t c) const {
    size_t s = 0;
    while (c >= segments[s].offset + segments[s].size) ++s;
    return ranges[j * rows.range_stride + s];
  }
  float code(size_t j, size_t c) const { return float(codes[j * head_dim() + c]); }
  float value(size_t j, size_t c) const { return range(j, c).scale * code(j, c) + range(j, c).min; }
};

// q (head_dim floats) rounded as keys of 4 or 2 bits are scored against (kv_codes.h), written out
// here: per 32 channels (zeros past the end) d = max |q| / 127 and round(q * (127 / max |q|)).
struct RoundedQuery {
  std::vector<float> d, qi;  // d per channel, qi as floats
  explicit RoundedQuery(const float* q, size_t n) : d(n), qi(n) {
    for (size_t b = 0; b < n; b += 32) {
      const size_t e = std::min(n, b + 32);
      float amax = 0.0f;
      for (size_t c = b; c < e; ++c) amax = std::max(amax, std::abs(q[c]));
      for (size_t c = b; c < e; ++c) {
        d[c] = amax / 127.0f;
        qi[c] = amax > 0.0f ? std::nearbyint(q[c] * (127.0f / amax)) : 0.0f;
      }
    }
  }
};

// The score of key row j of k for q: against the rounded query at 4 and 2 bits, else exact.
double expected_score(const CodedRun& k, size_t j, const float* q) {
  const size_t hd = k.head_dim();
  double s = 0.0;
  if (!scores_rounded_query(k.rows.bits)) {
    for (size_t c = 0; c < hd; ++c) s += double(q[c]) * k.value(j, c);
    return s;
  }
  const RoundedQuery r(q, hd);
  for (size_t c = 0; c < hd; ++c)
    s += double(r.d[c]) * r.qi[c] * k.range(j, c).scale * k.code(j, c) + double(q[c]) * k.range(j, c).min;
  return s;
}

TEST(KvCodes, DecodedRowIsScaleTimesCodePlusMin) {
  const CodedRun run({32, 16, 16}, 4, 3, false, 21);
  std::vector<float> row(64);
  for (size_t j = 0; j < 3; ++j) {
    decode_coded_row(run.rows, j, row.data());
    for (size_t c = 0; c < 64; ++c) ASSERT_FLOAT_EQ(row[c], run.value(j, c)) << j << " " << c;
  }
}

// Rounding the query to 8 bits moves a score by at most half a query step times each channel's
// |scale * code| (here: by less than the keys' own 4-bit rounding moved it), and never for 8 bits.
TEST(KvCodes, RoundedQueryScoreIsWithinHalfAStepOfTheExactDot) {
  for (unsigned bits : {8u, 4u, 2u}) {
    const CodedRun k({32, 32, 16, 16}, bits, 50, false, 40 + bits);
    const size_t hd = k.head_dim();
    for (uint32_t seed = 0; seed < 8; ++seed) {
      const auto q = random_floats(hd, 900 + seed);
      RoundedQueries rq;
      rq.round(q.data(), 1, hd, 1.0f, scalar_ops().quantize_q8);
      const RoundedQuery r(q.data(), hd);
      for (size_t j = 0; j < 50; ++j) {
        double exact = 0.0, bound = 0.0, key_step = 0.0;
        for (size_t c = 0; c < hd; ++c) {
          exact += double(q[c]) * k.value(j, c);
          bound += 0.5 * r.d[c] * std::abs(k.range(j, c).scale * k.code(j, c));
          key_step += 0.5 * std::abs(q[c]) * k.range(j, c).scale;  // the bound of the keys' rounding
        }
        const float got = coded_key_score(k.rows, j, rq.query(0), rq.query_codes(0), rq.query_scales(0));
        ASSERT_NEAR(got, expected_score(k, j, q.data()), 1e-4 * (1 + std::abs(exact))) << bits;
        if (!scores_rounded_query(bits)) {
          ASSERT_NEAR(got, exact, 1e-4 * (1 + std::abs(exact)));
          continue;
        }
        ASSERT_LE(std::abs(got - exact), bound + 1e-4) << bits << " row " << j;
        if (bits == 4) {
          ASSERT_LT(bound, key_step) << j;
        }
      }
    }
  }
}

// The scalar kernel against softmax attention over the decoded rows written out here (keys of 4
// and 2 bits scored against the rounded query, as kv_codes.h defines); every SIMD
// table against the scalar kernel on the shapes its blocks of 16 channels decode (head dim 64, 128
// in one, two or four segments, so 16-, 8- and 4-byte blocks; 1 to 9 queries, past one group of
// 8) and on those decoded code by code (odd head dims, uneven segments), odd key counts, shared and
// per-row ranges, with and without per-channel key ranges (KIVI's: folded into the queries, one
// set for every row or one per block of rows).
TEST_P(KvCodesSimdTest, AttentionOverCodedRowsMatchesScalar) {
  const SimdOps& simd = simd_ops(GetParam());
  const SimdOps& ref = scalar_ops();
  // {48}, {32, 16}: an odd last 16-channel block; {16, 16, ...}: two ranges in one 32-channel pair;
  // {32, 32, 32, 32}: groups of 32 (2-bit: 8-byte blocks; 2-bit {32, 32} keys are KIVI-like below).
  const std::vector<std::vector<uint32_t>> shapes = {
      {64},     {32, 32},    {128}, {64, 64}, {16, 16, 16, 16}, {36},
      {48, 16}, {16, 8, 16}, {48},  {32, 16}, {16, 16, 16},     {32, 32, 32, 32}};
  uint32_t seed = 100;
  size_t multi_set_cases = 0;  // cases whose rows span several KIVI blocks
  for (unsigned bits : {8u, 4u, 2u})
    for (const auto& shape : shapes)
      for (size_t n_keys : {1u, 7u, 129u})
        for (size_t n_q : {1u, 3u, 5u, 9u}) {
          ++seed;
          // The case's options from independent bits of a hash of its seed (the seed steps with n_q).
          const uint32_t mix = seed * 2654435761u;
          const bool shared = seed % 3 == 0, with_key_ranges = (mix >> 31) != 0;
          // Per-channel key ranges (KIVI's keys) on half the cases: on half of those per block of 4
          // rows, the first block entered at row 0-3 of it, else one block for all rows.
          const size_t block_rows = with_key_ranges && (mix >> 30) % 2 ? 4 : 0;
          // 2-bit {32, 32}: keys in one segment of the head as KIVI's per-channel keys are, values in
          // two groups (16-byte key blocks beside 8-byte value blocks at 2 bits, 16-byte at 4).
          // Beside 2-bit keys, values of 2 bits (every block size) and 4 on alternate cases.
          const bool kivi_like = bits == 2 && shape == std::vector<uint32_t>{32, 32};
          const unsigned value_bits = bits == 2 && seed / 4 % 2 ? 4 : bits;  // across every n_q
          const CodedRun k(kivi_like ? std::vector<uint32_t>{64} : shape, bits, n_keys, shared, seed),
              v(shape, value_bits, n_keys, !shared, seed + 7);
          const size_t hd = k.segments.back().offset + k.segments.back().size;
          // Ranges for every block the rows can touch (n_keys / 4 + 2 blocks of 4, entered anywhere).
          const size_t n_blocks = n_keys / 4 + 2;
          const auto q = random_floats(n_q * hd, seed + 3),
                     range_floats = random_floats(2 * n_blocks * hd, seed + 4);
          std::vector<CodeRange> key_ranges(n_blocks * hd);
          for (size_t i = 0; i < key_ranges.size(); ++i)
            key_ranges[i] = {0.5f + std::abs(range_floats[2 * i]), range_floats[2 * i + 1]};
          const CodedQueries sets{q.data(), n_q,        with_key_ranges ? key_ranges.data() : nullptr,
                                  hd,       block_rows, block_rows ? (mix >> 26) % 4 : 0};
          ASSERT_LE(sets.n_sets(n_keys), n_blocks);
          multi_set_cases += sets.n_sets(n_keys) > 1;
          const float scale = 0.125f;
          std::vector<float> m1(n_q), l1(n_q), a1(n_q * hd), p1(n_q * n_keys);
          std::vector<float> m2(n_q), l2(n_q), a2(n_q * hd), p2(n_q * n_keys);
          ref.attn_codes(sets, k.rows, v.rows, n_keys, hd, scale, m2.data(), l2.data(), a2.data(), p2.data());
          simd.attn_codes(sets, k.rows, v.rows, n_keys, hd, scale, m1.data(), l1.data(), a1.data(),
                          seed % 4 ? p1.data() : nullptr);
          for (size_t g = 0; g < n_q; ++g) {
            std::vector<double> s(n_keys), out(hd, 0.0);
            std::vector<float> qs(hd);
            for (size_t j = 0; j < n_keys; ++j) {
              // Row j's query: q, or q folded with its block's key ranges, and that fold's bias.
              const CodeRange* r = with_key_ranges ? &key_ranges[sets.set(j) * hd] : nullptr;
              double fold_bias = 0.0;
              for (size_t c = 0; c < hd; ++c) {
                qs[c] = q[g * hd + c] * (r ? r[c].scale : 1.0f) * scale;
                fold_bias += r ? double(q[g * hd + c]) * r[c].min * scale : 0.0;
              }
              s[j] = expected_score(k, j, qs.data()) + fold_bias;
            }
            const double mx = *std::max_element(s.begin(), s.end());
            double sum = 0.0;
            for (size_t j = 0; j < n_keys; ++j) {
              const double e = std::exp(s[j] - mx);
              sum += e;
              ASSERT_NEAR(p2[g * n_keys + j], e, 1e-4);
              for (size_t c = 0; c < hd; ++c) out[c] += e * v.value(j, c);
            }
            ASSERT_NEAR(m2[g], mx, 1e-3 * (1 + std::abs(mx)));
            ASSERT_NEAR(l2[g] / sum, 1.0, 1e-4);
            ASSERT_NEAR(m1[g], m2[g], 1e-4f * (1 + std::abs(m2[g])))
                << bits << " hd=" << hd << " n_q=" << n_q;
            ASSERT_NEAR(l1[g] / l2[g], 1.0f, 1e-4f);
            for (size_t c = 0; c < hd; ++c) {
              ASSERT_NEAR(a2[g * hd + c] / l2[g], out[c] / sum, 1e-4);
              ASSERT_NEAR(a1[g * hd + c] / l1[g], a2[g * hd + c] / l2[g], 1e-5f) << bits << " hd=" << hd;
            }
            if (seed % 4) {
              for (size_t j = 0; j < n_keys; ++j) ASSERT_NEAR(p1[g * n_keys + j], p2[g * n_keys + j], 1e-4f);
            }
          }
        }
  EXPECT_GE(multi_set_cases, 60u);
}

INSTANTIATE_TEST_SUITE_P(Isa, KvCodesSimdTest, ::testing::Values(SimdLevel::Avx2, SimdLevel::Avx512),
                         [](const auto& info) { return std::string(simd_level_name(info.param)); });

}  // namespace
}  // namespace ts
