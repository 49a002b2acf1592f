#include "kernels/quant_codes.h"

#include <cstring>

#include "kernels/quant_blocks.h"

namespace ts {

namespace {

template <class Block>
const Block& as(const uint8_t* p) {
  return *reinterpret_cast<const Block*>(p);
}

// Q5_0/Q5_1: nibbles of qs plus bit j of the little-endian qh as bit 4 of element j.
void q5_codes(const uint8_t* qh_bytes, const uint8_t* qs, int* u) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  for (int j = 0; j < 16; ++j) {
    u[j] = static_cast<int>((qs[j] & 0xF) | (((qh >> j) & 1u) << 4));
    u[j + 16] = static_cast<int>((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
  }
}

// The 2-bit field of element i (0..255) in a Q2_K/Q3_K qs array.
int q2_field(const uint8_t* qs, size_t i) {
  return (qs[(i / 128) * 32 + i % 32] >> (((i % 128) / 32) * 2)) & 3;
}

}  // namespace

BlockFields block_fields(QuantType type, const uint8_t* p) {
  BlockFields f;
  switch (type) {
    case QuantType::Q4_0:
      f.d = as<BlockQ4_0>(p).d;
      break;
    case QuantType::Q4_1:
      f.d = as<BlockQ4_1>(p).d;
      f.m = as<BlockQ4_1>(p).m;
      break;
    case QuantType::Q5_0:
      f.d = as<BlockQ5_0>(p).d;
      break;
    case QuantType::Q5_1:
      f.d = as<BlockQ5_1>(p).d;
      f.m = as<BlockQ5_1>(p).m;
      break;
    case QuantType::Q8_0:
      f.d = as<BlockQ8_0>(p).d;
      break;
    case QuantType::Q2_K: {
      const auto& blk = as<BlockQ2_K>(p);
      f.d = blk.d;
      f.m = blk.dmin;
      for (size_t g = 0; g < 16; ++g) {
        f.sc[g] = blk.scales[g] & 0xF;
        f.mn[g] = blk.scales[g] >> 4;
      }
      break;
    }
    case QuantType::Q3_K: {
      const auto& blk = as<BlockQ3_K>(p);
      f.d = blk.d;
      int8_t sc[16];
      unpack_q3_k_scales(blk.scales, sc);
      for (size_t g = 0; g < 16; ++g) f.sc[g] = sc[g];
      break;
    }
    case QuantType::Q4_K:
    case QuantType::Q5_K: {  // d, dmin and scales at the same offsets in both
      const auto& blk = as<BlockQ4_K>(p);
      f.d = blk.d;
      f.m = blk.dmin;
      for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        q4_k_scale_min(j, blk.scales, &sc, &m);
        f.sc[j] = sc;
        f.mn[j] = m;
      }
      break;
    }
    case QuantType::Q6_K: {
      const auto& blk = as<BlockQ6_K>(p);
      f.d = blk.d;
      for (size_t g = 0; g < 16; ++g) f.sc[g] = blk.scales[g];
      break;
    }
    default:
      break;
  }
  return f;
}

void block_codes(QuantType type, const uint8_t* p, int* u) {
  switch (type) {
    case QuantType::Q4_0:
    case QuantType::Q4_1: {
      const uint8_t* qs = type == QuantType::Q4_0 ? as<BlockQ4_0>(p).qs : as<BlockQ4_1>(p).qs;
      for (size_t j = 0; j < 16; ++j) {
        u[j] = qs[j] & 0xF;
        u[j + 16] = qs[j] >> 4;
      }
      return;
    }
    case QuantType::Q8_0:
      for (size_t j = 0; j < kQK8_0; ++j) u[j] = as<BlockQ8_0>(p).qs[j];
      return;
    case QuantType::Q5_0:
      q5_codes(as<BlockQ5_0>(p).qh, as<BlockQ5_0>(p).qs, u);
      return;
    case QuantType::Q5_1:
      q5_codes(as<BlockQ5_1>(p).qh, as<BlockQ5_1>(p).qs, u);
      return;
    case QuantType::Q2_K:
      for (size_t i = 0; i < kQK_K; ++i) u[i] = q2_field(as<BlockQ2_K>(p).qs, i);
      return;
    case QuantType::Q3_K: {  // q2 - (high bit ? 0 : 4) = (q2 + 4 * high bit) - 4
      const auto& blk = as<BlockQ3_K>(p);
      for (size_t i = 0; i < kQK_K; ++i)
        u[i] = q2_field(blk.qs, i) | (((blk.hmask[i % 32] >> (i / 32)) & 1) << 2);
      return;
    }
    case QuantType::Q4_K:
    case QuantType::Q5_K: {
      const bool five = type == QuantType::Q5_K;
      const uint8_t* qs = five ? as<BlockQ5_K>(p).qs : as<BlockQ4_K>(p).qs;
      for (size_t i = 0; i < kQK_K; ++i) {
        int q = (qs[(i / 64) * 32 + i % 32] >> (((i % 64) / 32) * 4)) & 0xF;
        if (five) q |= ((as<BlockQ5_K>(p).qh[i % 32] >> (i / 32)) & 1) << 4;
        u[i] = q;
      }
      return;
    }
    case QuantType::Q6_K: {
      const auto& blk = as<BlockQ6_K>(p);
      for (size_t i = 0; i < kQK_K; ++i) {
        const size_t half = i / 128, r = i % 128;
        const int lo = (blk.ql[half * 64 + r % 64] >> ((r / 64) * 4)) & 0xF;
        const int hi = (blk.qh[half * 32 + r % 32] >> ((r / 32) * 2)) & 3;
        u[i] = lo | (hi << 4);
      }
      return;
    }
    default:
      return;
  }
}

}  // namespace ts
