#include "eval/bench.h"

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>

#include "core/error.h"
#include "policies/builtin_policies.h"
#include "runtime/transformer.h"

namespace ts {
namespace {

// Wall and process CPU time of one measured run.
class Stopwatch {
 public:
  Stopwatch() : wall0_(std::chrono::steady_clock::now()), cpu0_(cpu_seconds()) {}
  // Appends n / elapsed seconds to `wall` and n / CPU seconds to `cpu`.
  void rate(double n, std::vector<double>& wall, std::vector<double>& cpu) const {
    wall.push_back(n / std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0_).count());
    cpu.push_back(n / (cpu_seconds() - cpu0_));
  }

 private:
  static double cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
  }
  std::chrono::steady_clock::time_point wall0_;
  double cpu0_;
};

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

std::vector<BenchResult> run_bench(const Model& model, const BenchParams& p,
                                   std::span<const BenchConfig> configs,
                                   const std::function<void(int, int)>& on_rep) {
  const ModelConfig& c = model.config();
  const size_t n_ctx = std::max(p.n_prompt, p.depth + p.n_gen) + 1;
  TS_CHECK(p.n_prompt + p.n_gen > 0, "bench: nothing to measure (-p 0 -n 0)");
  TS_CHECK(!configs.empty(), "bench: no configuration to measure");
  TS_CHECK(p.n_seq >= 1, "bench: --parallel needs at least one sequence");
  ThreadPool pool(p.threads);
  ForwardPass pass(model, pool);
  // Per configuration, the sequences decoded together; the first also runs the prefill.
  std::vector<std::vector<std::unique_ptr<Sequence>>> seqs(configs.size());
  std::vector<BenchResult> results(configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    for (size_t s = 0; s < p.n_seq; ++s) {
      seqs[i].push_back(std::make_unique<Sequence>(c, n_ctx));
      seqs[i][s]->set_policies(make_policy_stack(configs[i].policies, model));
    }
    BenchResult& r = results[i];
    r.threads = pool.size();
    r.kv_bytes_per_token = seqs[i][0]->cache().bytes_per_token();
    r.weight_bytes = model.decode_weight_bytes();
    r.decode_bytes_per_token =
        static_cast<double>(r.weight_bytes) / double(p.n_seq) +
        static_cast<double>(r.kv_bytes_per_token) * (double(p.depth) + double(p.n_gen) / 2);
  }
  const auto ignore = [](size_t, std::span<const float>) {};
  std::mt19937 rng(p.seed);
  // One untimed warm-up pass faults the weights in and sizes every buffer.
  for (auto& config_seqs : seqs)
    for (auto& seq : config_seqs)
      run_call(pass, *seq, random_tokens(std::min<size_t>(16, n_ctx - 1), c.n_vocab, rng), 15, ignore);
  std::vector<SequenceStep> steps(p.n_seq);
  // One context for every repetition: a sequence rewound to a checkpoint refills the rest of it.
  const auto context = random_tokens(p.depth, c.n_vocab, rng);
  for (int rep = 0; rep < p.reps; ++rep) {
    // Every configuration sees the same tokens in a repetition.
    const auto prompt = random_tokens(p.n_prompt, c.n_vocab, rng);
    const auto gen = random_tokens(p.n_gen, c.n_vocab, rng);
    for (size_t i = 0; i < configs.size(); ++i) {
      Sequence& first = *seqs[i][0];
      if (p.n_prompt) {
        first.truncate(0);
        const Stopwatch watch;
        run_call(pass, first, prompt, p.n_prompt - 1, ignore);
        watch.rate(double(p.n_prompt), results[i].prefill_tps, results[i].prefill_cpu_tps);
      }
      if (p.n_gen) {
        // The depth's context is filled once (a long fill costs far more than the decode timed)
        // and each repetition rewinds to it, unless a prompt run replaced it; policies whose state
        // rewinds only to checkpoints refill from the last one, and those that cannot rewind (the
        // evicting baselines, a stack ranking whole calls) refill it all.
        for (size_t s = 0; s < p.n_seq; ++s) {
          Sequence& seq = *seqs[i][s];
          const bool refill = (p.n_prompt && s == 0) || rep == 0;
          const size_t from = refill ? 0 : seq.rewind_point(p.depth);
          seq.truncate(from);
          if (p.depth > from)
            run_call(pass, seq, std::span(context).subspan(from), p.depth - 1 - from, ignore);
        }
        const Stopwatch watch;
        for (size_t t = 0; t < p.n_gen; ++t) {
          for (size_t s = 0; s < p.n_seq; ++s) steps[s] = {seqs[i][s].get(), std::span(&gen[t], 1), 0};
          pass.run(steps, [](size_t, size_t, std::span<const float>) {});
          for (auto& seq : seqs[i]) seq->end_batch();
        }
        watch.rate(double(p.n_gen * p.n_seq), results[i].decode_tps, results[i].decode_cpu_tps);
        const KvCache& cache = first.cache();
        double held = 0;
        for (size_t l = 0; l < c.n_layers; ++l) held += cache.held_fraction(l);
        results[i].kv_held_fraction = held / double(c.n_layers);
        results[i].kv_held_bytes_per_token = double(cache.held_bytes()) / double(cache.size());
      }
      results[i].kv_resident_bytes = first.cache().resident_bytes();
    }
    on_rep(rep + 1, p.reps);
  }
  for (BenchResult& r : results) r.peak_rss_bytes = peak_rss_bytes();
  return results;
}

}  // namespace ts
