// tokensieve bench: prefill and decode throughput, memory, and decode bandwidth beside the
// machine's measured read bandwidth.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "core/cpu_features.h"
#include "core/progress.h"
#include "eval/bench.h"
#include "kernels/bandwidth_probe.h"

namespace ts::cli {
namespace {

struct BenchOptions {
  ModelOptions model;
  BenchParams params;
  bool json = false;
};

void bench(BenchOptions o) {
  auto model = Model::load(o.model.model_path);
  o.params.threads = o.model.threads;
  Progress progress("bench", static_cast<size_t>(o.params.reps));
  const BenchResult r =
      run_bench(*model, o.params, [&](int done, int) { progress.update(static_cast<size_t>(done)); });
  progress.finish();
  ThreadPool pool(o.model.threads);
  const double machine_gbs = measure_read_bandwidth(pool);
  const double pp = median(r.prefill_tps), tg = median(r.decode_tps);
  const double decode_gbs = tg * r.decode_bytes_per_token / 1e9;
  const auto minmax = [](const std::vector<double>& v) {
    return v.empty() ? nlohmann::json::array()
                     : nlohmann::json::array(
                           {*std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end())});
  };
  nlohmann::json j = {
      {"model", o.model.model_path},
      {"threads", r.threads},
      {"simd", simd_level_name(active_simd_level())},
      {"n_prompt", o.params.n_prompt},
      {"n_gen", o.params.n_gen},
      {"depth", o.params.depth},
      {"reps", o.params.reps},
      {"prefill_tps", pp},
      {"prefill_tps_all", r.prefill_tps},
      {"prefill_tps_minmax", minmax(r.prefill_tps)},
      {"decode_tps", tg},
      {"decode_tps_all", r.decode_tps},
      {"decode_tps_minmax", minmax(r.decode_tps)},
      {"peak_rss_bytes", r.peak_rss_bytes},
      {"weight_bytes", r.weight_bytes},
      {"kv_bytes_per_token", r.kv_bytes_per_token},
      {"decode_bytes_per_token", r.decode_bytes_per_token},
      {"decode_bandwidth_gbs", decode_gbs},
      {"machine_bandwidth_gbs", machine_gbs},
      {"decode_bandwidth_fraction", machine_gbs > 0 ? decode_gbs / machine_gbs : 0.0},
  };
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf(
      "| model | threads | simd | test | t/s (median) | min | max |\n|---|---|---|---|---|---|---|\n");
  const std::string name = model->config().name;
  if (!r.prefill_tps.empty())
    std::printf("| %s | %d | %s | pp%zu | %.1f | %.1f | %.1f |\n", name.c_str(), r.threads,
                simd_level_name(active_simd_level()), o.params.n_prompt, pp,
                j["prefill_tps_minmax"][0].get<double>(), j["prefill_tps_minmax"][1].get<double>());
  if (!r.decode_tps.empty())
    std::printf("| %s | %d | %s | tg%zu @ d%zu | %.1f | %.1f | %.1f |\n", name.c_str(), r.threads,
                simd_level_name(active_simd_level()), o.params.n_gen, o.params.depth, tg,
                j["decode_tps_minmax"][0].get<double>(), j["decode_tps_minmax"][1].get<double>());
  std::printf(
      "\npeak RSS %.1f MiB | KV %zu bytes/token | decode reads %.1f MB/token -> %.1f GB/s = %.0f%% of the "
      "measured %.1f GB/s read bandwidth\n",
      double(r.peak_rss_bytes) / (1 << 20), r.kv_bytes_per_token, r.decode_bytes_per_token / 1e6, decode_gbs,
      100.0 * j["decode_bandwidth_fraction"].get<double>(), machine_gbs);
}

}  // namespace

void register_bench(CLI::App& app) {
  auto opts = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "prefill/decode throughput and bandwidth (llama-bench style)");
  add_model_options(*cmd, opts->model, false);
  BenchParams& p = opts->params;
  cmd->add_option("-p,--n-prompt", p.n_prompt, "prefill tokens (0 = skip)")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-n,--n-gen", p.n_gen, "decode tokens (0 = skip)")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-d,--depth", p.depth, "KV-cache depth before decode")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-r,--reps", p.reps, "repetitions")->check(CLI::Range(1, 1000));
  cmd->add_flag("--json", opts->json, "print one JSON object on stdout");
  cmd->callback([opts] { bench(*opts); });
}

}  // namespace ts::cli
