#include "eval/bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "core/error.h"
#include "runtime/transformer.h"

namespace ts {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Random ordinary tokens (as llama-bench): ids past the first few, which hold control tokens.
std::vector<int32_t> random_tokens(size_t n, uint32_t n_vocab, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> dist(std::min<int32_t>(100, static_cast<int32_t>(n_vocab) - 1),
                                              static_cast<int32_t>(n_vocab) - 1);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = dist(rng);
  return t;
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

size_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<size_t>(u.ru_maxrss) * 1024;
}

BenchResult run_bench(const Model& model, const BenchParams& p, const std::function<void(int, int)>& on_rep) {
  const ModelConfig& c = model.config();
  const size_t n_ctx = std::max(p.n_prompt, p.depth + p.n_gen) + 1;
  TS_CHECK(p.n_prompt + p.n_gen > 0, "bench: nothing to measure (-p 0 -n 0)");
  ThreadPool pool(p.threads);
  Transformer tf(model, pool, n_ctx);
  std::mt19937 rng(p.seed);
  BenchResult r;
  r.threads = pool.size();
  r.kv_bytes_per_token = tf.cache().bytes_per_token();
  r.weight_bytes = model.weight_bytes();
  // The tied output matrix is read by the output projection; every other tensor once per token.
  r.decode_bytes_per_token = static_cast<double>(r.weight_bytes) +
                             static_cast<double>(r.kv_bytes_per_token) * (double(p.depth) + double(p.n_gen) / 2);
  // One untimed warm-up pass faults the weights in and sizes every buffer.
  tf.forward(random_tokens(std::min<size_t>(16, n_ctx - 1), c.n_vocab, rng), false);
  for (int rep = 0; rep < p.reps; ++rep) {
    if (p.n_prompt) {
      const auto tokens = random_tokens(p.n_prompt, c.n_vocab, rng);
      tf.truncate(0);
      const auto t0 = std::chrono::steady_clock::now();
      tf.forward(tokens, false);
      r.prefill_tps.push_back(double(p.n_prompt) / seconds_since(t0));
    }
    if (p.n_gen) {
      tf.truncate(0);
      if (p.depth) tf.forward(random_tokens(p.depth, c.n_vocab, rng), false);
      const auto gen = random_tokens(p.n_gen, c.n_vocab, rng);
      const auto t0 = std::chrono::steady_clock::now();
      for (int32_t t : gen) tf.forward(std::span(&t, 1), false);
      r.decode_tps.push_back(double(p.n_gen) / seconds_since(t0));
    }
    on_rep(rep + 1, p.reps);
  }
  r.peak_rss_bytes = peak_rss_bytes();
  return r;
}

}  // namespace ts
