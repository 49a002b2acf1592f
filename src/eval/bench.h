#pragma once
// llama-bench-style throughput measurement of one model and configuration.
#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"

namespace ts {

struct BenchParams {
  size_t n_prompt = 512;  // prefill tokens (pp); 0 = skip
  size_t n_gen = 128;     // decode tokens (tg); 0 = skip
  size_t depth = 0;  // tokens already in the KV cache before decode is timed (filled once; see run_bench)
  // Sequences decoded together, one batched step per token (continuous batching, as the server
  // runs its slots); decode tokens/s counts every sequence's tokens. Prefill runs one sequence.
  size_t n_seq = 1;
  int threads = 0;
  int reps = 3;
  uint32_t seed = 1;
};

// One configuration of the forward pass to measure: a policy stack (empty: dense).
struct BenchConfig {
  std::string label;
  std::vector<std::string> policies;
};

struct BenchResult {
  std::vector<double> prefill_tps, decode_tps;  // one value per repetition
  // The same per second of the process's CPU time (all threads): on a machine shared with other
  // processes, unlike wall time, it does not count the time this process waited for a core.
  std::vector<double> prefill_cpu_tps, decode_cpu_tps;
  size_t kv_bytes_per_token = 0;
  // After the last decode run: the fraction of cached positions the layers hold (mean over
  // layers; < 1 when a policy evicts) and the bytes the held rows take per cached position.
  double kv_held_fraction = 1.0;
  double kv_held_bytes_per_token = 0;
  size_t kv_resident_bytes = 0;  // KvCache::resident_bytes after the last run: the cache's memory
  size_t weight_bytes = 0;       // weight bytes one decode step reads (Model::decode_weight_bytes)
  size_t peak_rss_bytes = 0;
  double decode_bytes_per_token = 0;  // weights + KV read by one decode step at the mean depth
  int threads = 0;
};

// Measures every configuration; each repetition runs them in turn, so drift and noise from other
// processes hit all of them alike and their ratios stay meaningful. Results follow `configs`;
// peak_rss_bytes is the process's (all configurations together). on_rep(done, total) reports progress.
std::vector<BenchResult> run_bench(const Model& model, const BenchParams& p,
                                   std::span<const BenchConfig> configs,
                                   const std::function<void(int, int)>& on_rep);

double median(std::vector<double> v);
size_t peak_rss_bytes();

}  // namespace ts
