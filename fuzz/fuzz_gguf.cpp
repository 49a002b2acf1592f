// libFuzzer target for the GGUF reader: any input must give a model or a ts::Error, and everything a
// parsed model hands out (values, tensor bytes) must be safe to read. Any other exception, crash or
// sanitizer report is a bug.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "kernels/quant_types.h"
#include "model/gguf.h"

namespace {

volatile uint64_t g_sink;  // keeps the reads below from being optimized away

// Runs `f`; a ts::Error is an allowed outcome (a wrong-type accessor call), anything else is a bug.
template <typename F>
void allow_error(F f) {
  try {
    f();
  } catch (const ts::Error&) {
  }
}

void touch(const ts::GgufValue& v) {
  uint64_t h = static_cast<uint64_t>(v.type);
  allow_error([&] { h += v.as_u64("v"); });
  allow_error([&] { h += static_cast<uint64_t>(v.as_i64("v")); });
  allow_error([&] { h += v.as_f64("v") != 0; });
  allow_error([&] { h += v.as_bool("v"); });
  allow_error([&] { h += v.as_string("v").size(); });
  allow_error([&] {
    for (const ts::GgufValue& item : v.as_array("v")) touch(item);
  });
  g_sink = g_sink + h;
}

void touch(const ts::GgufTensor& t) {
  const ts::QuantTraits& traits = ts::quant_traits(t.type);
  uint64_t h = t.n_elements + t.offset + t.dims.size();
  for (size_t i = 0; i < t.n_bytes; ++i) h += t.data[i];
  // Dequantize the first blocks: exercises the reference kernels on arbitrary bytes.
  const size_t n_blocks = std::min<size_t>(t.n_bytes / traits.block_bytes, 64);
  std::vector<float> out(n_blocks * traits.block_elems);
  traits.to_float(t.data, out.data(), out.size());
  for (float f : out) h += f == 0.0f;
  g_sink = g_sink + h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto f = ts::GgufFile::parse({data, size}, "fuzz.gguf");
    for (const auto& [key, value] : f->metadata()) {
      g_sink = g_sink + key.size() + (f->find(key) == &value);
      touch(value);
    }
    for (const ts::GgufTensor& t : f->tensors()) {
      g_sink = g_sink + (f->find_tensor(t.name) == &t);
      touch(t);
    }
    g_sink = g_sink + f->alignment() + f->version();
  } catch (const ts::Error&) {
  }
  return 0;
}
