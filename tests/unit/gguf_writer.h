#pragma once
// Test-side GGUF writer: builds v2/v3 files in memory with metadata of every type (nested arrays too)
// and tensors of any type from raw bytes. It checks nothing on purpose beyond add_tensor's size check,
// so tests can also write broken files (odd type ids, bad offsets, wrong versions).
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/quant_types.h"
#include "model/gguf.h"

namespace ts::test {

// One encoded metadata value: its type id and the bytes that follow the type id in the file.
struct WValue {
  GgufValueType type = GgufValueType::U8;
  std::vector<uint8_t> bytes;

  template <typename T>
  static WValue raw(GgufValueType type, T v) {
    WValue w{type, std::vector<uint8_t>(sizeof(T))};
    std::memcpy(w.bytes.data(), &v, sizeof(T));
    return w;
  }
  static WValue u8(uint8_t v) { return raw(GgufValueType::U8, v); }
  static WValue i8(int8_t v) { return raw(GgufValueType::I8, v); }
  static WValue u16(uint16_t v) { return raw(GgufValueType::U16, v); }
  static WValue i16(int16_t v) { return raw(GgufValueType::I16, v); }
  static WValue u32(uint32_t v) { return raw(GgufValueType::U32, v); }
  static WValue i32(int32_t v) { return raw(GgufValueType::I32, v); }
  static WValue u64(uint64_t v) { return raw(GgufValueType::U64, v); }
  static WValue i64(int64_t v) { return raw(GgufValueType::I64, v); }
  static WValue f32(float v) { return raw(GgufValueType::F32, v); }
  static WValue f64(double v) { return raw(GgufValueType::F64, v); }
  static WValue boolean(bool v) { return raw(GgufValueType::BOOL, static_cast<uint8_t>(v)); }
  static WValue str(std::string_view s) {
    WValue w = raw(GgufValueType::STRING, static_cast<uint64_t>(s.size()));
    append(w.bytes, s.data(), s.size());
    return w;
  }
  // Items are written as given; they should all have type `elem` (not checked, for negative tests).
  static WValue array(GgufValueType elem, const std::vector<WValue>& items) {
    WValue w = raw(GgufValueType::ARRAY, static_cast<uint32_t>(elem));
    const auto count = static_cast<uint64_t>(items.size());
    append(w.bytes, &count, sizeof count);
    for (const WValue& it : items) append(w.bytes, it.bytes.data(), it.bytes.size());
    return w;
  }
  // Arrays of numbers, e.g. numbers(GgufValueType::F32, std::vector<float>{...}).
  template <typename T>
  static WValue numbers(GgufValueType elem, const std::vector<T>& xs) {
    std::vector<WValue> items;
    for (T x : xs) items.push_back(raw(elem, x));
    return array(elem, items);
  }
  // resize + memcpy rather than vector::insert, which trips GCC 12 -Warray-bounds false positives at -O3.
  static void append(std::vector<uint8_t>& out, const void* p, size_t n) {
    if (n == 0) return;
    const size_t at = out.size();
    out.resize(at + n);
    std::memcpy(out.data() + at, p, n);
  }
  static WValue strings(const std::vector<std::string>& xs) {
    std::vector<WValue> items;
    for (const std::string& x : xs) items.push_back(str(x));
    return array(GgufValueType::STRING, items);
  }
};

class GgufWriter {
 public:
  struct Tensor {
    std::string name;
    uint32_t type_id = 0;
    std::vector<uint64_t> dims;  // dims[0] is the row length, as in the file
    std::vector<uint8_t> data;
    std::optional<uint64_t> offset;  // written instead of the real offset (data is still placed normally)
  };

  uint32_t version = 3;
  size_t alignment = 32;  // layout only; set_alignment() also writes the key

  GgufWriter& add(std::string key, WValue v) {
    kv_.emplace_back(std::move(key), std::move(v));
    return *this;
  }
  GgufWriter& set_alignment(uint32_t a) {
    alignment = a;
    return add("general.alignment", WValue::u32(a));
  }
  // A tensor of a supported type; `data` must be exactly the tensor's size.
  GgufWriter& add_tensor(std::string name, QuantType type, std::vector<uint64_t> dims,
                         std::vector<uint8_t> data) {
    const QuantTraits& t = quant_traits(type);
    uint64_t n = 1;
    for (uint64_t d : dims) n *= d;
    if (dims.empty() || dims[0] % t.block_elems != 0 || data.size() != row_bytes(t, n)) {
      throw std::invalid_argument("GgufWriter::add_tensor: data does not match type and dims of " + name);
    }
    return add_raw_tensor(
        {std::move(name), static_cast<uint32_t>(type), std::move(dims), std::move(data), {}});
  }
  GgufWriter& add_f32_tensor(std::string name, std::vector<uint64_t> dims, const std::vector<float>& xs) {
    std::vector<uint8_t> data(xs.size() * sizeof(float));
    std::memcpy(data.data(), xs.data(), data.size());
    return add_tensor(std::move(name), QuantType::F32, std::move(dims), std::move(data));
  }
  GgufWriter& add_raw_tensor(Tensor t) {
    tensors_.push_back(std::move(t));
    return *this;
  }
  std::vector<Tensor>& tensors() { return tensors_; }

  // The whole file. Tensor data is packed in order, each start aligned; no padding after the last.
  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out;
    put(out, "GGUF", 4);
    put_pod(out, version);
    put_pod(out, static_cast<uint64_t>(tensors_.size()));
    put_pod(out, static_cast<uint64_t>(kv_.size()));
    for (const auto& [key, v] : kv_) {
      put_string(out, key);
      put_pod(out, static_cast<uint32_t>(v.type));
      put(out, v.bytes.data(), v.bytes.size());
    }
    std::vector<uint64_t> offsets;
    uint64_t end = 0;
    for (const Tensor& t : tensors_) {
      offsets.push_back(align_up(end));
      end = offsets.back() + t.data.size();
      put_string(out, t.name);
      put_pod(out, static_cast<uint32_t>(t.dims.size()));
      for (uint64_t d : t.dims) put_pod(out, d);
      put_pod(out, t.type_id);
      put_pod(out, t.offset.value_or(offsets.back()));
    }
    if (!tensors_.empty()) out.resize(align_up(out.size()), 0);
    const size_t data_start = out.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      out.resize(data_start + offsets[i], 0);
      put(out, tensors_[i].data.data(), tensors_[i].data.size());
    }
    return out;
  }

  void write(const std::string& path) const {
    const std::vector<uint8_t> b = bytes();
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    if (!f) throw std::runtime_error("GgufWriter: cannot write " + path);
  }

 private:
  static void put(std::vector<uint8_t>& out, const void* p, size_t n) { WValue::append(out, p, n); }
  template <typename T>
  static void put_pod(std::vector<uint8_t>& out, T v) {
    put(out, &v, sizeof(T));
  }
  static void put_string(std::vector<uint8_t>& out, std::string_view s) {
    put_pod(out, static_cast<uint64_t>(s.size()));
    put(out, s.data(), s.size());
  }
  uint64_t align_up(uint64_t x) const { return (x + alignment - 1) / alignment * alignment; }

  std::vector<std::pair<std::string, WValue>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace ts::test
