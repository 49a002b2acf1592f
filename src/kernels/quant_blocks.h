#pragma once
// GGUF/ggml block layouts, byte for byte. Every struct is packed (alignment 1): GGUF only promises
// general.alignment for a tensor's start, and that may legally be 1, so a block can sit at any address.
// Scales are raw fp16 bit patterns (convert with fp16_to_float); multi-byte fields are little-endian.
#include <cstddef>
#include <cstdint>

namespace ts {

inline constexpr size_t kQK4_0 = 32;
inline constexpr size_t kQK4_1 = 32;
inline constexpr size_t kQK5_0 = 32;
inline constexpr size_t kQK5_1 = 32;
inline constexpr size_t kQK8_0 = 32;
inline constexpr size_t kQK_K = 256;       // elements per k-quant super-block
inline constexpr size_t kKScaleSize = 12;  // packed 6-bit scales and mins of Q4_K / Q5_K

// x = d * (q - 8); element j is the low nibble of qs[j], element j + 16 the high nibble.
struct __attribute__((packed)) BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// x = d * q + m; nibble order as Q4_0.
struct __attribute__((packed)) BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK4_1 / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

// x = d * (q - 16); bit i of the little-endian u32 qh is bit 4 of element i.
struct __attribute__((packed)) BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK5_0 / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

// x = d * q + m; bit layout as Q5_0.
struct __attribute__((packed)) BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK5_1 / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

// x = d * q.
struct __attribute__((packed)) BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34);

// 16 groups of 16. scales[g]: low nibble scale, high nibble min; x = d*sc*q - dmin*m with 2-bit q.
// Element i: bits ((i % 128) / 32) * 2 of qs[(i / 128) * 32 + i % 32].
struct __attribute__((packed)) BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// 16 groups of 16 with signed 6-bit scales (stored + 32); x = d * sc * (q2 - (hbit ? 0 : 4)).
// Low 2 bits as Q2_K; the high bit of element i is bit i / 32 of hmask[i % 32].
struct __attribute__((packed)) BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// 8 groups of 32 with 6-bit scales and mins; x = d*sc*q - dmin*m. Element i is nibble (i % 64) / 32
// of qs[(i / 64) * 32 + i % 32].
struct __attribute__((packed)) BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// Q4_K plus a fifth bit: bit i / 32 of qh[i % 32] is bit 4 of element i.
struct __attribute__((packed)) BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// 16 groups of 16 with int8 scales; x = d * sc * (q - 32) with 6-bit q. In each half of 128:
// low 4 bits are nibble (i % 128) / 64 of ql[half*64 + i % 64], high 2 bits are bits
// ((i % 128) / 32) * 2 of qh[half*32 + i % 32].
struct __attribute__((packed)) BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// Q3_K's 16 scales are 6 bits each: the low 4 bits are nibbles of bytes 0..7 (scales 0..7 in the low
// nibbles, 8..15 in the high ones), the top 2 bits are 2-bit fields of bytes 8..11 (field k / 4 of byte
// 8 + k % 4). Returns the signed scales (stored value - 32).
inline void unpack_q3_k_scales(const uint8_t* s, int8_t out[16]) {
  for (int k = 0; k < 16; ++k) {
    const int lo = (k < 8 ? s[k] : s[k - 8] >> 4) & 0xF;
    const int hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
    out[k] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
}

// Scale and min of group j (0..7) of Q4_K / Q5_K: groups 0..3 use the low 6 bits of bytes j and j + 4;
// groups 4..7 combine a nibble of byte j + 4 with the top 2 bits of bytes j - 4 and j.
inline void q4_k_scale_min(int j, const uint8_t* s, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

}  // namespace ts
