#pragma once
// One traits row per tensor storage type (the ggml way): block geometry and the scalar
// reference conversion to float. Block layouts follow the GGUF specification exactly.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ts {

// Values are the GGUF/ggml type ids stored in files.
enum class QuantType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  BF16 = 30,
};

// Converts `n` elements (a whole number of blocks) starting at `src` into floats.
using ToFloatFn = void (*)(const void* src, float* dst, size_t n);

struct QuantTraits {
  QuantType type;
  std::string_view name;
  size_t block_elems;  // elements per block
  size_t block_bytes;  // bytes per block
  ToFloatFn to_float;  // scalar reference
};

// Traits of a supported type, or nullopt for an id we do not support (unknown or unimplemented).
std::optional<QuantTraits> quant_traits(uint32_t type_id);
const QuantTraits& quant_traits(QuantType type);

// Bytes occupied by a row of `n` elements (n must be a multiple of block_elems).
inline size_t row_bytes(const QuantTraits& t, size_t n) { return n / t.block_elems * t.block_bytes; }

float fp16_to_float(uint16_t h);
uint16_t float_to_fp16(float f);
float bf16_to_float(uint16_t h);

}  // namespace ts
