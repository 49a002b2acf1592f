// tokensieve bench: prefill and decode throughput, memory, and decode bandwidth beside the
// machine's measured read bandwidth; with --policy, optionally beside dense in the same run.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "core/cpu_features.h"
#include "core/progress.h"
#include "eval/bench.h"
#include "kernels/bandwidth_probe.h"
#include "policies/builtin_policies.h"

namespace ts::cli {
namespace {

struct BenchOptions {
  ModelOptions model;
  std::vector<std::string> configs;  // --config: more configurations, policy specs joined by ';'
  BenchParams params;
  bool vs_dense = false;
  bool json = false;
};

nlohmann::json minmax(const std::vector<double>& v) {
  if (v.empty()) return nlohmann::json::array();
  return {*std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end())};
}

nlohmann::json result_json(const BenchConfig& config, const BenchResult& r, double machine_gbs) {
  const double tg = median(r.decode_tps);
  const double decode_gbs = tg * r.decode_bytes_per_token / 1e9;
  return {
      {"policies", config.policies},
      {"prefill_tps", median(r.prefill_tps)},
      {"prefill_tps_all", r.prefill_tps},
      {"prefill_tps_minmax", minmax(r.prefill_tps)},
      {"decode_tps", tg},
      {"decode_tps_all", r.decode_tps},
      {"decode_tps_minmax", minmax(r.decode_tps)},
      {"prefill_cpu_tps", median(r.prefill_cpu_tps)},
      {"decode_cpu_tps", median(r.decode_cpu_tps)},
      {"kv_bytes_per_token", r.kv_bytes_per_token},
      {"kv_held_fraction", r.kv_held_fraction},
      {"kv_held_bytes_per_token", r.kv_held_bytes_per_token},
      {"kv_resident_bytes", r.kv_resident_bytes},
      {"decode_bytes_per_token", r.decode_bytes_per_token},
      {"decode_bandwidth_gbs", decode_gbs},
      {"decode_bandwidth_fraction", machine_gbs > 0 ? decode_gbs / machine_gbs : 0.0},
  };
}

void print_rows(const std::string& name, const BenchOptions& o, const BenchConfig& config,
                const nlohmann::json& j, int threads) {
  const char* simd = simd_level_name(active_simd_level());
  const std::string label = config.label.empty() ? "dense" : config.label;
  if (o.params.n_prompt)
    std::printf("| %s | %s | %d | %s | pp%zu | %.1f | %.1f | %.1f |\n", name.c_str(), label.c_str(), threads,
                simd, o.params.n_prompt, j["prefill_tps"].get<double>(),
                j["prefill_tps_minmax"][0].get<double>(), j["prefill_tps_minmax"][1].get<double>());
  if (o.params.n_gen)
    std::printf("| %s | %s | %d | %s | tg%zu @ d%zu%s | %.1f | %.1f | %.1f |\n", name.c_str(), label.c_str(),
                threads, simd, o.params.n_gen, o.params.depth,
                o.params.n_seq > 1 ? (" x" + std::to_string(o.params.n_seq) + " seq").c_str() : "",
                j["decode_tps"].get<double>(), j["decode_tps_minmax"][0].get<double>(),
                j["decode_tps_minmax"][1].get<double>());
}

double ratio(const nlohmann::json& a, const nlohmann::json& b, const char* key) {
  const double den = b[key].get<double>();
  return den > 0 ? a[key].get<double>() / den : 0.0;
}

// The policy specs of one --config: specs separated by ';' (a spec itself holds ':' and ',').
std::vector<std::string> config_specs(const std::string& text) {
  std::vector<std::string> specs;
  for (size_t at = 0; at <= text.size();) {
    const size_t end = std::min(text.find(';', at), text.size());
    specs.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return specs;
}

std::string config_label(const std::vector<std::string>& specs) {
  std::string label;
  for (const std::string& spec : specs) label += (label.empty() ? "" : " + ") + spec;
  return label;
}

void bench(BenchOptions o) {
  auto model = Model::load(o.model.model_path);
  o.params.threads = o.model.threads;
  std::vector<BenchConfig> configs;  // the measured ones, then dense with --vs-dense
  if (!o.model.policies.empty() || o.configs.empty())
    configs.push_back({config_label(o.model.policies), o.model.policies});
  for (const std::string& text : o.configs) {
    const std::vector<std::string> specs = config_specs(text);
    configs.push_back({config_label(specs), specs});
  }
  const size_t n_measured = configs.size();
  TS_CHECK(!o.vs_dense || !configs[0].policies.empty(), "bench: --vs-dense needs at least one --policy");
  if (o.vs_dense) configs.push_back({"", {}});
  Progress progress("bench", static_cast<size_t>(o.params.reps));
  const std::vector<BenchResult> results = run_bench(
      *model, o.params, configs, [&](int done, int) { progress.update(static_cast<size_t>(done)); });
  progress.finish();
  // After run_bench took the peak RSS: the probe's 512 MiB buffer is not the engine's memory (an
  // outside measure of the whole process, as /usr/bin/time's, counts it).
  ThreadPool pool(o.model.threads);
  const double machine_gbs = measure_read_bandwidth(pool);
  const BenchResult& r = results[0];
  nlohmann::json measured = nlohmann::json::array();
  for (size_t i = 0; i < n_measured; ++i) {
    nlohmann::json ji = result_json(configs[i], results[i], machine_gbs);
    if (o.vs_dense) {
      const nlohmann::json dense = result_json(configs.back(), results.back(), machine_gbs);
      ji["speedup_vs_dense"] = {{"prefill", ratio(ji, dense, "prefill_tps")},
                                {"decode", ratio(ji, dense, "decode_tps")},
                                {"prefill_cpu", ratio(ji, dense, "prefill_cpu_tps")},
                                {"decode_cpu", ratio(ji, dense, "decode_cpu_tps")}};
    }
    measured.push_back(ji);
  }
  // The first configuration's figures at the top level, every one under "configs"; dense beside
  // them with --vs-dense.
  nlohmann::json j = measured[0];
  j.update({
      {"model", o.model.model_path},
      {"threads", r.threads},
      {"simd", simd_level_name(active_simd_level())},
      {"n_prompt", o.params.n_prompt},
      {"n_gen", o.params.n_gen},
      {"depth", o.params.depth},
      {"n_seq", o.params.n_seq},
      {"reps", o.params.reps},
      {"peak_rss_bytes", r.peak_rss_bytes},
      {"weight_bytes", r.weight_bytes},
      {"machine_bandwidth_gbs", machine_gbs},
      {"configs", measured},
  });
  if (o.vs_dense) j["dense"] = result_json(configs.back(), results.back(), machine_gbs);
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf(
      "| model | policy | threads | simd | test | t/s (median) | min | max |\n"
      "|---|---|---|---|---|---|---|---|\n");
  const std::string name = model->config().name;
  for (size_t i = 0; i < n_measured; ++i) print_rows(name, o, configs[i], measured[i], r.threads);
  if (o.vs_dense) {
    print_rows(name, o, configs.back(), j["dense"], r.threads);
    for (size_t i = 0; i < n_measured; ++i) {
      const nlohmann::json& s = measured[i]["speedup_vs_dense"];
      std::printf(
          "\n%s vs dense (medians, interleaved repetitions): prefill %.3fx, decode %.3fx"
          "\n  by process CPU time (not counting waits for a core): prefill %.3fx, decode %.3fx\n",
          configs[i].label.c_str(), s["prefill"].get<double>(), s["decode"].get<double>(),
          s["prefill_cpu"].get<double>(), s["decode_cpu"].get<double>());
    }
  }
  std::printf("\n");
  for (size_t i = 0; i < configs.size(); ++i) {
    const BenchResult& ri = results[i];
    const nlohmann::json& ji = i < n_measured ? measured[i] : j["dense"];
    std::printf("%s: KV %zu bytes/token", configs[i].label.empty() ? "dense" : configs[i].label.c_str(),
                ri.kv_bytes_per_token);
    if (o.params.n_gen)
      std::printf(
          ", after decode the layers hold %.1f%% of the cached positions (%.0f bytes each), decode reads "
          "%.1f "
          "MB/token -> %.1f GB/s = %.0f%% of the measured %.1f GB/s",
          100.0 * ri.kv_held_fraction, ri.kv_held_bytes_per_token, ri.decode_bytes_per_token / 1e6,
          ji["decode_bandwidth_gbs"].get<double>(), 100.0 * ji["decode_bandwidth_fraction"].get<double>(),
          machine_gbs);
    std::printf("; KV cache resident %.1f MiB\n", double(ri.kv_resident_bytes) / (1 << 20));
  }
  std::printf("peak RSS of the process (every configuration's cache together) %.1f MiB\n",
              double(r.peak_rss_bytes) / (1 << 20));
}

}  // namespace

void register_bench(CLI::App& app) {
  auto opts = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "prefill/decode throughput and bandwidth (llama-bench style)");
  add_model_options(*cmd, opts->model, false);
  add_policy_option(*cmd, opts->model.policies);
  cmd->add_option("--config", opts->configs,
                  "another configuration measured in the same run: policy specs joined by ';' "
                  "(repeatable; each is timed beside the others and, with --vs-dense, beside dense)")
      ->check([](const std::string& text) {
        try {
          for (const std::string& spec : config_specs(text)) builtin_policies().create(spec);
          return std::string();
        } catch (const Error& e) {
          return std::string(e.what());
        }
      });
  BenchParams& p = opts->params;
  cmd->add_option("-p,--n-prompt", p.n_prompt, "prefill tokens (0 = skip)")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-n,--n-gen", p.n_gen, "decode tokens (0 = skip)")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-d,--depth", p.depth, "KV-cache depth before decode")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-r,--reps", p.reps, "repetitions")->check(CLI::Range(1, 1000));
  cmd->add_option("--parallel", p.n_seq,
                  "sequences decoded together, one batched step per token (as the server's slots); decode "
                  "tokens/s counts all of them")
      ->check(CLI::Range(1, 1024));
  cmd->add_flag("--vs-dense", opts->vs_dense,
                "also measure the dense engine, interleaved with the policy run, and print the speed-ups");
  cmd->add_flag("--json", opts->json, "print one JSON object on stdout");
  cmd->callback([opts] { bench(*opts); });
}

}  // namespace ts::cli
