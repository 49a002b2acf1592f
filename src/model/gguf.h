#pragma once
// GGUF v2/v3 reader. Parses metadata and the tensor table with strict bounds checks on every
// count, length and offset; tensor data stays in the memory map.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/mapped_file.h"
#include "kernels/quant_types.h"

namespace ts {

enum class GgufValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

struct GgufValue;
using GgufArray = std::vector<GgufValue>;

struct GgufValue {
  GgufValueType type = GgufValueType::U8;
  GgufValueType elem_type = GgufValueType::U8;  // element type when type == ARRAY
  std::variant<uint64_t, int64_t, double, bool, std::string, GgufArray> value;

  // Typed accessors; they throw ts::Error naming `what` if the value has another type.
  uint64_t as_u64(std::string_view what) const;  // any non-negative integer type
  int64_t as_i64(std::string_view what) const;   // any integer type that fits
  double as_f64(std::string_view what) const;    // F32/F64 (and integers)
  bool as_bool(std::string_view what) const;
  const std::string& as_string(std::string_view what) const;
  const GgufArray& as_array(std::string_view what) const;
};

struct GgufTensor {
  std::string name;
  QuantType type;
  std::vector<uint64_t> dims;  // dims[0] is the contiguous (row) dimension, as ggml's ne[]
  uint64_t n_elements = 0;
  uint64_t offset = 0;            // relative to the data section
  const uint8_t* data = nullptr;  // inside the mapping
  size_t n_bytes = 0;
};

class GgufFile {
 public:
  // Maps and parses a file; throws ts::Error with a one-line message on any defect.
  static std::unique_ptr<GgufFile> open(const std::string& path);
  // Parses bytes held elsewhere (tests, fuzzing). `bytes` must outlive the object.
  static std::unique_ptr<GgufFile> parse(std::span<const uint8_t> bytes, std::string name);

  uint32_t version() const { return version_; }
  const std::string& name() const { return name_; }
  size_t alignment() const { return alignment_; }

  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;
  // Required-key getters: throw "NAME: missing metadata key KEY" or a type error.
  const GgufValue& require(std::string_view key) const;
  std::string get_string(std::string_view key, std::string_view fallback) const;
  uint64_t get_u64(std::string_view key, uint64_t fallback) const;
  double get_f64(std::string_view key, double fallback) const;
  bool get_bool(std::string_view key, bool fallback) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;

 private:
  GgufFile() = default;
  void parse_all(std::span<const uint8_t> bytes);

  std::unique_ptr<MappedFile> file_;
  std::string name_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<GgufTensor> tensors_;
};

}  // namespace ts
