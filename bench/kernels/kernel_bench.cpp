// Microbenchmarks of the decode-attention kernels and the key selector, on data that stays in
// cache: what each costs per key row in compute alone, per instruction set. The sparse-speed
// matrix (bench/sparse_speed.py) measures whole decode steps; this is where a kernel change is
// seen without the noise of a model run. Built unless -DTS_BENCH=OFF; run
//   build/bin/ts_kernel_bench [--benchmark_filter=codes]
// Rows: 2731 keys (a decode step's key chunk at 8K context, 3 KV heads, 2 threads), 3 queries (a
// SmolLM2 KV group), head_dim 64.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/kv_codes.h"
#include "kernels/quant_types.h"
#include "kernels/simd_ops.h"
#include "policies/key_budget.h"

namespace ts {
namespace {

constexpr size_t kRows = 2731, kQueries = 3;
constexpr uint32_t kHeadDim = 64;

std::vector<float> normal_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<uint16_t> halves(const std::vector<float>& f) {
  std::vector<uint16_t> h(f.size());
  for (size_t i = 0; i < f.size(); ++i) h[i] = float_to_fp16(f[i]);
  return h;
}

void attn_f16(benchmark::State& state, const SimdOps& ops) {
  const auto k = halves(normal_floats(kRows * kHeadDim, 1)), v = halves(normal_floats(kRows * kHeadDim, 2));
  const auto q = normal_floats(kQueries * kHeadDim, 3);
  std::vector<float> m(kQueries), l(kQueries), acc(kQueries * kHeadDim);
  for (auto _ : state)
    ops.attn_chunk(q.data(), kQueries, k.data(), v.data(), kHeadDim, kRows, kHeadDim, 0.125f, m.data(),
                   l.data(), acc.data());
  state.SetItemsProcessed(state.iterations() * kRows);
}

// Rows of `bits` codes, the head cut into `segments` equal ranges per row (1: per-token groups of
// >= 64 channels; 2: groups of 32), all of range {0.1, -0.5}.
struct BenchRows {
  std::vector<CodeSegment> segs;
  std::vector<uint8_t> packed;
  std::vector<CodeRange> ranges;
  CodedRows rows;
  BenchRows(unsigned bits, uint32_t segments, const CodeRange& range, uint32_t seed) {
    for (uint32_t s = 0; s < segments; ++s) segs.push_back({s * kHeadDim / segments, kHeadDim / segments, s});
    const size_t row_bytes = code_bytes(bits, kHeadDim);
    packed.resize(kRows * row_bytes);
    std::vector<uint8_t> codes(kHeadDim);
    std::mt19937 rng(seed);
    for (size_t j = 0; j < kRows; ++j) {
      for (uint8_t& c : codes) c = static_cast<uint8_t>(rng() & code_max(bits));
      for (const CodeSegment& s : segs)
        pack_codes(&codes[s.offset], s.size, bits, &packed[j * row_bytes + code_bytes(bits, s.offset)]);
    }
    ranges.assign(kRows * segments, range);
    rows = {packed.data(), row_bytes, bits, segs.data(), segs.size(), ranges.data(), segments};
  }
};

// Coded keys and values of `bits` cut into `segments` ranges per row; with kivi_block, keys as
// KIVI's: one segment, their per-channel ranges beside the queries, a set per block of that many rows.
void attn_codes(benchmark::State& state, const SimdOps& ops, unsigned bits, uint32_t segments,
                size_t kivi_block) {
  const BenchRows values(bits, segments, {0.1f, -0.5f}, 4);
  const BenchRows keys(bits, kivi_block ? 1 : segments,
                       kivi_block ? CodeRange{1.0f, 0.0f} : CodeRange{0.1f, -0.5f}, 4);
  const auto q = normal_floats(kQueries * kHeadDim, 5);
  const size_t n_blocks = kivi_block ? kRows / kivi_block + 1 : 0;
  const std::vector<CodeRange> key_ranges(n_blocks * kHeadDim, CodeRange{0.1f, -0.5f});
  const CodedQueries queries{q.data(), kQueries,   kivi_block ? key_ranges.data() : nullptr,
                             kHeadDim, kivi_block, 0};
  std::vector<float> m(kQueries), l(kQueries), acc(kQueries * kHeadDim);
  for (auto _ : state)
    ops.attn_codes(queries, keys.rows, values.rows, kRows, kHeadDim, 0.125f, m.data(), l.data(), acc.data(),
                   nullptr);
  state.SetItemsProcessed(state.iterations() * kRows);
}

// TokenButler's shared importance scores at 8K positions: int8 keys, width 3 heads x 16.
void dot_i8_pairs(benchmark::State& state, const SimdOps& ops) {
  constexpr size_t kPositions = 8192, kWidth = 48;
  std::vector<int8_t> keys(kPositions * kWidth);
  std::mt19937 rng(6);
  for (int8_t& c : keys) c = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  const std::vector<float> scales(kPositions, 0.01f);
  const auto q = normal_floats(kWidth, 7);
  std::vector<int16_t> q16(kWidth);
  const float q_scale = round_query_i16(q.data(), kWidth, q16.data());
  std::vector<float> out(kPositions);
  for (auto _ : state)
    ops.dot_i8_pairs(keys.data(), kWidth * kF16Block, scales.data(), kPositions, q16.data(), q_scale, kWidth,
                     out.data());
  state.SetItemsProcessed(state.iterations() * kPositions);
}

// The top half of 8192 scores (logit-like: normal, mean 2), as TokenButler and Oracle select.
void select_top_half(benchmark::State& state) {
  constexpr size_t kPositions = 8192;
  std::vector<float> scores = normal_floats(kPositions, 8);
  for (float& s : scores) s = 2.0f + 3.0f * s;
  std::vector<uint32_t> candidates(kPositions), keys;
  for (size_t j = 0; j < kPositions; ++j) candidates[j] = static_cast<uint32_t>(j);
  for (auto _ : state) {
    select_top_keys(candidates, scores, kPositions / 2, 4, keys);
    benchmark::DoNotOptimize(keys.data());
  }
  state.SetItemsProcessed(state.iterations() * kPositions);
}

void register_all() {
  for (int level = 0; level <= static_cast<int>(detected_simd_level()); ++level) {
    const SimdLevel simd = static_cast<SimdLevel>(level);
    const SimdOps& ops = simd_ops(simd);
    const std::string isa = simd_level_name(simd);
    benchmark::RegisterBenchmark(("attn_f16/" + isa).c_str(), attn_f16, std::cref(ops));
    for (const unsigned bits : {4u, 2u})
      for (const uint32_t segments : {1u, 2u})
        benchmark::RegisterBenchmark(
            ("attn_codes/" + isa + "/bits:" + std::to_string(bits) + "/segments:" + std::to_string(segments))
                .c_str(),
            attn_codes, std::cref(ops), bits, segments, size_t{0});
    for (const size_t block : {32u, 128u})  // KIVI: 2-bit keys per channel, values in groups of 32
      benchmark::RegisterBenchmark(
          ("attn_codes_kivi/" + isa + "/bits:2/block:" + std::to_string(block)).c_str(), attn_codes,
          std::cref(ops), 2u, 2u, block);
    benchmark::RegisterBenchmark(("dot_i8_pairs/" + isa).c_str(), dot_i8_pairs, std::cref(ops));
  }
  benchmark::RegisterBenchmark("select_top_keys/8192/half", select_top_half);
}

}  // namespace
}  // namespace ts

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  ts::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
