#include "kernels/quant_types.h"

#include <array>
#include <bit>
#include <cstring>

#include "core/error.h"
#include "kernels/quant_blocks.h"

// The reference conversions below compute each value with the same float operations, in the same order,
// as ggml's dequantize_row_* (and the gguf Python package), so results match them bit for bit.
static_assert(std::endian::native == std::endian::little, "GGUF data is little-endian");

namespace ts {

float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1F) {
    // Inf, or NaN with its payload kept and the quiet bit set, as the F16C instruction does, so the SIMD
    // kernels and this reference agree.
    bits = sign | 0x7F800000u | (mant << 13) | (mant ? 0x00400000u : 0u);
  } else if (exp != 0) {
    bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal half: mant * 2^-24 is a normal float; shift the leading one into the implicit bit.
    const int top = std::bit_width(mant) - 1;  // 0..9
    bits = sign | (static_cast<uint32_t>(top + 127 - 24) << 23) | ((mant << (23 - top)) & 0x7FFFFFu);
  }
  return std::bit_cast<float>(bits);
}

uint16_t float_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) {
    // NaN: keep the top payload bits and force the quiet bit so the payload can never truncate to Inf.
    return static_cast<uint16_t>(sign | 0x7E00u | ((ax >> 13) & 0x3FFu));
  }
  // 65520 (0x477FF000) is halfway between the largest half, 65504, and 65536; ties go to even (Inf).
  if (ax >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);
  if (ax >= 0x38800000u) {
    // Normal half (>= 2^-14): round the 13 dropped bits to nearest even; a carry correctly bumps the
    // exponent. Then rebias the exponent from 127 to 15.
    ax += 0xFFFu + ((ax >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((ax - (112u << 23)) >> 13));
  }
  // Subnormal half: the result is round(|f| / 2^-24). |f| <= 2^-25 rounds to zero (2^-25 is a tie).
  if (ax <= 0x33000000u) return sign;
  const uint32_t e = ax >> 23;                      // 102..112
  const uint32_t m = (ax & 0x7FFFFFu) | 0x800000u;  // 24-bit significand
  const uint32_t shift = 126 - e;                   // 14..24
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;  // q == 0x400 is the smallest normal: still right
  return static_cast<uint16_t>(sign | q);
}

float bf16_to_float(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

namespace {

// Callers pass a whole number of blocks; F32/F16/BF16 data may be unaligned, hence memcpy.
void f32_to_float(const void* src, float* dst, size_t n) {
  if (n > 0) std::memcpy(dst, src, n * sizeof(float));  // n == 0 may come with null pointers
}

void f16_to_float(const void* src, float* dst, size_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    dst[i] = fp16_to_float(h);
  }
}

void bf16_to_float_row(const void* src, float* dst, size_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    dst[i] = bf16_to_float(h);
  }
}

void q4_0_to_float(const void* src, float* dst, size_t n) {
  const auto* b = static_cast<const BlockQ4_0*>(src);
  for (size_t k = 0; k < n / kQK4_0; ++k, ++b, dst += kQK4_0) {
    const float d = fp16_to_float(b->d);
    for (size_t j = 0; j < kQK4_0 / 2; ++j) {
      dst[j] = d * static_cast<float>((b->qs[j] & 0xF) - 8);
      dst[j + kQK4_0 / 2] = d * static_cast<float>((b->qs[j] >> 4) - 8);
    }
  }
}

void q4_1_to_float(const void* src, float* dst, size_t n) {
  const auto* b = static_cast<const BlockQ4_1*>(src);
  for (size_t k = 0; k < n / kQK4_1; ++k, ++b, dst += kQK4_1) {
    const float d = fp16_to_float(b->d);
    const float m = fp16_to_float(b->m);
    for (size_t j = 0; j < kQK4_1 / 2; ++j) {
      dst[j] = d * static_cast<float>(b->qs[j] & 0xF) + m;
      dst[j + kQK4_1 / 2] = d * static_cast<float>(b->qs[j] >> 4) + m;
    }
  }
}

// The 5-bit quants of one Q5_0/Q5_1 block, 0..31.
void q5_values(const uint8_t qh_bytes[4], const uint8_t qs[16], int out[32]) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  for (int j = 0; j < 16; ++j) {
    out[j] = (qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1u) << 4);
    out[j + 16] = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
  }
}

void q5_0_to_float(const void* src, float* dst, size_t n) {
  const auto* b = static_cast<const BlockQ5_0*>(src);
  for (size_t k = 0; k < n / kQK5_0; ++k, ++b, dst += kQK5_0) {
    const float d = fp16_to_float(b->d);
    int q[32];
    q5_values(b->qh, b->qs, q);
    for (int j = 0; j < 32; ++j) dst[j] = d * static_cast<float>(q[j] - 16);
  }
}

void q5_1_to_float(const void* src, float* dst, size_t n) {
  const auto* b = static_cast<const BlockQ5_1*>(src);
  for (size_t k = 0; k < n / kQK5_1; ++k, ++b, dst += kQK5_1) {
    const float d = fp16_to_float(b->d);
    const float m = fp16_to_float(b->m);
    int q[32];
    q5_values(b->qh, b->qs, q);
    for (int j = 0; j < 32; ++j) dst[j] = d * static_cast<float>(q[j]) + m;
  }
}

void q8_0_to_float(const void* src, float* dst, size_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(src);
  for (size_t k = 0; k < n / kQK8_0; ++k, ++b, dst += kQK8_0) {
    const float d = fp16_to_float(b->d);
    for (size_t j = 0; j < kQK8_0; ++j) dst[j] = d * static_cast<float>(b->qs[j]);
  }
}

// The 2-bit field of element i (0..255) in a Q2_K/Q3_K qs array.
inline int q2_field(const uint8_t* qs, size_t i) {
  return (qs[(i / 128) * 32 + i % 32] >> (((i % 128) / 32) * 2)) & 3;
}

void q2_k_to_float(const void* src, float* dst, size_t n) {
  const auto* b = static_cast<const BlockQ2_K*>(src);
  for (size_t k = 0; k < n / kQK_K; ++k, ++b, dst += kQK_K) {
    const float d = fp16_to_float(b->d);
    const float dmin = fp16_to_float(b->dmin);
    for (size_t g = 0; g < kQK_K / 16; ++g) {
      const float dl = d * static_cast<float>(b->scales[g] & 0xF);
      const float ml = dmin * static_cast<float>(b->scales[g] >> 4);
      for (size_t i = g * 16; i < g * 16 + 16; ++i) dst[i] = dl * static_cast<float>(q2_field(b->qs, i)) - ml;
    }
  }
}

void q3_k_to_float(const void* src, float* dst, size_t n) {
  const auto* b = static_cast<const BlockQ3_K*>(src);
  for (size_t k = 0; k < n / kQK_K; ++k, ++b, dst += kQK_K) {
    const float d = fp16_to_float(b->d);
    int8_t sc[16];
    unpack_q3_k_scales(b->scales, sc);
    for (size_t g = 0; g < kQK_K / 16; ++g) {
      const float dl = d * static_cast<float>(sc[g]);
      for (size_t i = g * 16; i < g * 16 + 16; ++i) {
        const bool high = (b->hmask[i % 32] >> (i / 32)) & 1;
        dst[i] = dl * static_cast<float>(q2_field(b->qs, i) - (high ? 0 : 4));
      }
    }
  }
}

// Shared by Q4_K and Q5_K: `qh` is null for Q4_K.
void q45_k_to_float(const uint8_t* scales, const uint8_t* qh, const uint8_t* qs, float d, float dmin,
                    float* dst) {
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    q4_k_scale_min(j, scales, &sc, &m);
    const float d1 = d * static_cast<float>(sc);
    const float m1 = dmin * static_cast<float>(m);
    for (size_t i = j * 32; i < static_cast<size_t>(j * 32 + 32); ++i) {
      int q = (qs[(i / 64) * 32 + i % 32] >> (((i % 64) / 32) * 4)) & 0xF;
      if (qh) q |= ((qh[i % 32] >> (i / 32)) & 1) << 4;
      dst[i] = d1 * static_cast<float>(q) - m1;
    }
  }
}

void q4_k_to_float(const void* src, float* dst, size_t n) {
  const auto* b = static_cast<const BlockQ4_K*>(src);
  for (size_t k = 0; k < n / kQK_K; ++k, ++b, dst += kQK_K) {
    q45_k_to_float(b->scales, nullptr, b->qs, fp16_to_float(b->d), fp16_to_float(b->dmin), dst);
  }
}

void q5_k_to_float(const void* src, float* dst, size_t n) {
  const auto* b = static_cast<const BlockQ5_K*>(src);
  for (size_t k = 0; k < n / kQK_K; ++k, ++b, dst += kQK_K) {
    q45_k_to_float(b->scales, b->qh, b->qs, fp16_to_float(b->d), fp16_to_float(b->dmin), dst);
  }
}

void q6_k_to_float(const void* src, float* dst, size_t n) {
  const auto* b = static_cast<const BlockQ6_K*>(src);
  for (size_t k = 0; k < n / kQK_K; ++k, ++b, dst += kQK_K) {
    const float d = fp16_to_float(b->d);
    for (size_t g = 0; g < kQK_K / 16; ++g) {
      const float dl = d * static_cast<float>(b->scales[g]);
      for (size_t i = g * 16; i < g * 16 + 16; ++i) {
        const size_t half = i / 128, r = i % 128;
        const int lo = (b->ql[half * 64 + r % 64] >> ((r / 64) * 4)) & 0xF;
        const int hi = (b->qh[half * 32 + r % 32] >> ((r / 32) * 2)) & 3;
        dst[i] = dl * static_cast<float>((lo | (hi << 4)) - 32);
      }
    }
  }
}

constexpr std::array kTraits = {
    QuantTraits{QuantType::F32, "F32", 1, 4, f32_to_float},
    QuantTraits{QuantType::F16, "F16", 1, 2, f16_to_float},
    QuantTraits{QuantType::Q4_0, "Q4_0", kQK4_0, sizeof(BlockQ4_0), q4_0_to_float},
    QuantTraits{QuantType::Q4_1, "Q4_1", kQK4_1, sizeof(BlockQ4_1), q4_1_to_float},
    QuantTraits{QuantType::Q5_0, "Q5_0", kQK5_0, sizeof(BlockQ5_0), q5_0_to_float},
    QuantTraits{QuantType::Q5_1, "Q5_1", kQK5_1, sizeof(BlockQ5_1), q5_1_to_float},
    QuantTraits{QuantType::Q8_0, "Q8_0", kQK8_0, sizeof(BlockQ8_0), q8_0_to_float},
    QuantTraits{QuantType::Q2_K, "Q2_K", kQK_K, sizeof(BlockQ2_K), q2_k_to_float},
    QuantTraits{QuantType::Q3_K, "Q3_K", kQK_K, sizeof(BlockQ3_K), q3_k_to_float},
    QuantTraits{QuantType::Q4_K, "Q4_K", kQK_K, sizeof(BlockQ4_K), q4_k_to_float},
    QuantTraits{QuantType::Q5_K, "Q5_K", kQK_K, sizeof(BlockQ5_K), q5_k_to_float},
    QuantTraits{QuantType::Q6_K, "Q6_K", kQK_K, sizeof(BlockQ6_K), q6_k_to_float},
    QuantTraits{QuantType::BF16, "BF16", 1, 2, bf16_to_float_row},
};

}  // namespace

std::optional<QuantTraits> quant_traits(uint32_t type_id) {
  for (const QuantTraits& t : kTraits) {
    if (static_cast<uint32_t>(t.type) == type_id) return t;
  }
  return std::nullopt;
}

const QuantTraits& quant_traits(QuantType type) {
  for (const QuantTraits& t : kTraits) {
    if (t.type == type) return t;
  }
  fail("unsupported tensor type id ", static_cast<uint32_t>(type));
}

}  // namespace ts
