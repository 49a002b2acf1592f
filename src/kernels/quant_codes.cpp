#include "kernels/quant_codes.h"

#include <cstring>

#include "kernels/quant_blocks.h"

namespace ts {

bool has_code_form(QuantType type) {
  switch (type) {
    case QuantType::Q5_0:
    case QuantType::Q5_1:
    case QuantType::Q2_K:
    case QuantType::Q3_K:
    case QuantType::Q4_K:
    case QuantType::Q5_K:
    case QuantType::Q6_K:
      return true;
    default:
      return false;
  }
}

namespace {

template <class Block>
const Block& as(const uint8_t* p) {
  return *reinterpret_cast<const Block*>(p);
}

void fill(float* a, float* b, size_t n, float av, float bv) {
  for (size_t g = 0; g < n; ++g) {
    a[g] = av;
    b[g] = bv;
  }
}

// Q4_K / Q5_K: 8 groups of 32, each two groups of 16 here.
void k45_scales(const uint8_t* scales, uint16_t d16, uint16_t dmin16, float* a, float* b) {
  const float d = fp16_to_float(d16), dmin = fp16_to_float(dmin16);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    q4_k_scale_min(j, scales, &sc, &m);
    fill(a + 2 * j, b + 2 * j, 2, d * static_cast<float>(sc), -dmin * static_cast<float>(m));
  }
}

// Q5_0/Q5_1: nibbles of qs plus bit j of the little-endian qh as bit 4 of element j.
void q5_codes(const uint8_t* qh_bytes, const uint8_t* qs, uint8_t* u) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  for (int j = 0; j < 16; ++j) {
    u[j] = static_cast<uint8_t>((qs[j] & 0xF) | (((qh >> j) & 1u) << 4));
    u[j + 16] = static_cast<uint8_t>((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
  }
}

// The 2-bit field of element i (0..255) in a Q2_K/Q3_K qs array.
int q2_field(const uint8_t* qs, size_t i) {
  return (qs[(i / 128) * 32 + i % 32] >> (((i % 128) / 32) * 2)) & 3;
}

}  // namespace

void block_group_scales(QuantType type, const uint8_t* p, float* a, float* b) {
  switch (type) {
    case QuantType::Q5_0:
      fill(a, b, 2, fp16_to_float(as<BlockQ5_0>(p).d), 0.0f);
      return;
    case QuantType::Q5_1:
      fill(a, b, 2, fp16_to_float(as<BlockQ5_1>(p).d), fp16_to_float(as<BlockQ5_1>(p).m));
      return;
    case QuantType::Q2_K: {
      const auto& blk = as<BlockQ2_K>(p);
      const float d = fp16_to_float(blk.d), dmin = fp16_to_float(blk.dmin);
      for (size_t g = 0; g < 16; ++g) {
        a[g] = d * static_cast<float>(blk.scales[g] & 0xF);
        b[g] = -dmin * static_cast<float>(blk.scales[g] >> 4);
      }
      return;
    }
    case QuantType::Q3_K: {
      const auto& blk = as<BlockQ3_K>(p);
      const float d = fp16_to_float(blk.d);
      int8_t sc[16];
      unpack_q3_k_scales(blk.scales, sc);
      for (size_t g = 0; g < 16; ++g) {
        a[g] = d * static_cast<float>(sc[g]);
        b[g] = 0.0f;
      }
      return;
    }
    case QuantType::Q4_K:
      k45_scales(as<BlockQ4_K>(p).scales, as<BlockQ4_K>(p).d, as<BlockQ4_K>(p).dmin, a, b);
      return;
    case QuantType::Q5_K:
      k45_scales(as<BlockQ5_K>(p).scales, as<BlockQ5_K>(p).d, as<BlockQ5_K>(p).dmin, a, b);
      return;
    case QuantType::Q6_K: {
      const auto& blk = as<BlockQ6_K>(p);
      const float d = fp16_to_float(blk.d);
      for (size_t g = 0; g < 16; ++g) {
        a[g] = d * static_cast<float>(blk.scales[g]);
        b[g] = 0.0f;
      }
      return;
    }
    default:
      return;
  }
}

void block_codes(QuantType type, const uint8_t* p, uint8_t* u) {
  switch (type) {
    case QuantType::Q5_0:
      q5_codes(as<BlockQ5_0>(p).qh, as<BlockQ5_0>(p).qs, u);
      return;
    case QuantType::Q5_1:
      q5_codes(as<BlockQ5_1>(p).qh, as<BlockQ5_1>(p).qs, u);
      return;
    case QuantType::Q2_K:
      for (size_t i = 0; i < kQK_K; ++i) u[i] = static_cast<uint8_t>(q2_field(as<BlockQ2_K>(p).qs, i));
      return;
    case QuantType::Q3_K: {  // q2 - (high bit ? 0 : 4) = (q2 + 4 * high bit) - 4
      const auto& blk = as<BlockQ3_K>(p);
      for (size_t i = 0; i < kQK_K; ++i)
        u[i] = static_cast<uint8_t>(q2_field(blk.qs, i) | (((blk.hmask[i % 32] >> (i / 32)) & 1) << 2));
      return;
    }
    case QuantType::Q4_K:
    case QuantType::Q5_K: {
      const bool five = type == QuantType::Q5_K;
      const uint8_t* qs = five ? as<BlockQ5_K>(p).qs : as<BlockQ4_K>(p).qs;
      for (size_t i = 0; i < kQK_K; ++i) {
        int q = (qs[(i / 64) * 32 + i % 32] >> (((i % 64) / 32) * 4)) & 0xF;
        if (five) q |= ((as<BlockQ5_K>(p).qh[i % 32] >> (i / 32)) & 1) << 4;
        u[i] = static_cast<uint8_t>(q);
      }
      return;
    }
    case QuantType::Q6_K: {
      const auto& blk = as<BlockQ6_K>(p);
      for (size_t i = 0; i < kQK_K; ++i) {
        const size_t half = i / 128, r = i % 128;
        const int lo = (blk.ql[half * 64 + r % 64] >> ((r / 64) * 4)) & 0xF;
        const int hi = (blk.qh[half * 32 + r % 32] >> ((r / 32) * 2)) & 3;
        u[i] = static_cast<uint8_t>(lo | (hi << 4));
      }
      return;
    }
    default:
      return;
  }
}

}  // namespace ts
