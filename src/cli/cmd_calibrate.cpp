// tokensieve calibrate: fit a policy to the model on WikiText-2 calibration text and write its profile.
//   calibrate sleb       SLEB's iterative search over "remove this layer"
//   calibrate shortened  Shortened LLaMA's one-shot PPL criterion over "remove this layer"
//   calibrate orthorank  either search (--method) over "make this layer an OrthoRank layer"
//   calibrate kvsink     the stable outlier channel and its emergence layer (from the probe texts,
//                        as analyze outliers), and static KV ranges per exclusion rule
// The layer searches write layer profiles (policies/layer_profile.h; the first and the last layer
// are never candidates, SLEB's barriers); kvsink writes a kvsink profile (outlier_profile.h) for
// kvsink:profile=FILE and kvquant:ranges=static,profile=FILE.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/outliers.h"
#include "core/error.h"
#include "core/progress.h"
#include "eval/calibration.h"
#include "eval/layer_search.h"
#include "policies/layer_profile.h"

namespace ts::cli {
namespace {

struct CalibrateOptions {
  ModelOptions model;
  std::string policy, method, data_dir;
  std::vector<double> sparsities;  // one profile each
  std::vector<std::string> outputs;
  double ratio = 0.333;
  size_t windows = 1, ctx = 512;
  bool json = false;
  OutlierProbe probe;  // kvsink
};

std::string join_layers(const std::vector<uint32_t>& layers) {
  std::string s;
  for (uint32_t l : layers) s += (s.empty() ? "" : ",") + std::to_string(l);
  return s;
}

// The --policy spec that applies the policy to `layers`; none for the unchanged model.
std::vector<std::string> policy_specs(const CalibrateOptions& o, const std::vector<uint32_t>& layers) {
  if (layers.empty()) return {};
  std::string spec = cat(o.policy, ":layers=", join_layers(layers));
  if (o.policy == "orthorank") spec += cat(",ratio=", o.ratio);
  return {spec};
}

// The slice's windows as separate sequences.
std::vector<std::vector<int32_t>> slice_windows(const CalibrationSlice& s) {
  std::vector<std::vector<int32_t>> w;
  for (size_t i = 0; i < s.windows; ++i)
    w.emplace_back(s.tokens.begin() + static_cast<std::ptrdiff_t>(i * s.ctx),
                   s.tokens.begin() + static_cast<std::ptrdiff_t>((i + 1) * s.ctx));
  return w;
}

nlohmann::ordered_json slice_json(const CalibrationSlice& s) {
  return {{"data", s.path},          {"split", s.train_split ? "train" : "test tail"},
          {"first_token", s.offset}, {"file_tokens", s.file_tokens},
          {"windows", s.windows},    {"ctx", s.ctx}};
}

void calibrate_kvsink(const CalibrateOptions& o) {
  if (!o.sparsities.empty() || !o.method.empty())
    throw CLI::ValidationError("--sparsity", "kvsink has no sparsity or search method");
  if (o.outputs.size() != 1)
    throw CLI::ValidationError("--output", "kvsink writes one profile: give one -o FILE");
  const auto start = std::chrono::steady_clock::now();
  auto model = Model::load(o.model.model_path);
  ThreadPool pool(o.model.threads);
  OutlierFindings f = find_outliers(o.probe, *model, pool);
  const CalibrationSlice slice = wikitext2_calibration_slice(*model, o.data_dir, o.windows, o.ctx);
  OutlierProfile& p = f.profile;
  p.ranges =
      calibrate_kv_ranges(*model, pool, slice_windows(slice), p.emergence_layer, p.channel, o.probe.sinks);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  nlohmann::ordered_json calib = slice_json(slice);
  calib["keys"] = "post-RoPE, as cached";
  calib["preserved"] = o.probe.sinks;
  calib["probe_sinks"] = f.sinks;
  calib["seconds"] = seconds;
  p.calibration_json = calib.dump();
  write_outlier_profile(o.outputs[0], p);
  if (o.json) {
    std::printf("%s\n", nlohmann::ordered_json({{"profile", o.outputs[0]},
                                                {"emergence_layer", p.emergence_layer},
                                                {"channel", p.channel},
                                                {"channels", p.channels},
                                                {"calibration", calib}})
                            .dump()
                            .c_str());
    return;
  }
  std::printf(
      "kvsink: sink channel %u, emergence layer %u; static KV ranges (excluding none, pfn-%zu, kvsink-%zu) "
      "from "
      "%zu x %zu tokens of %s in %.0f s -> %s\n",
      p.channel, p.emergence_layer, o.probe.sinks, o.probe.sinks, slice.windows, slice.ctx,
      slice.path.c_str(), seconds, o.outputs[0].c_str());
}

void calibrate(CalibrateOptions o) {
  if (o.policy == "kvsink") return calibrate_kvsink(o);
  if (o.sparsities.empty()) throw CLI::ValidationError("--sparsity", cat(o.policy, " needs --sparsity"));
  if (o.method.empty()) o.method = o.policy == "shortened" ? "shortened" : "sleb";
  if (o.policy != "orthorank" && o.method != o.policy)
    throw CLI::ValidationError("--method", cat(o.policy, " is searched with --method ", o.policy));
  if (o.outputs.size() != o.sparsities.size())
    throw CLI::ValidationError("--output", "give one -o FILE per --sparsity value");
  const auto start = std::chrono::steady_clock::now();
  auto model = Model::load(o.model.model_path);
  const size_t n_layers = model->config().n_layers;
  TS_CHECK(n_layers >= 3, "the model has ", n_layers, " layers; the search needs at least 3");
  const double kept = o.policy == "orthorank" ? o.ratio : 0.0;
  std::vector<size_t> counts;
  for (double s : o.sparsities) counts.push_back(layers_for_sparsity(s, n_layers, kept));
  const size_t max_count = *std::max_element(counts.begin(), counts.end());
  std::vector<uint32_t> candidates;
  for (uint32_t l = 1; l + 1 < n_layers; ++l) candidates.push_back(l);
  const LayerSearchMethod method =
      o.method == "sleb" ? LayerSearchMethod::Iterative : LayerSearchMethod::OneShot;

  const CalibrationSlice slice = wikitext2_calibration_slice(*model, o.data_dir, o.windows, o.ctx);
  ThreadPool pool(o.model.threads);
  Transformer tf(*model, pool, o.ctx, o.model.precision());
  // Both searches are prefix-closed: the first k layers they take are their answer for k layers,
  // so one search to the largest count serves every sparsity.
  const size_t one_shot_sets = method == LayerSearchMethod::OneShot ? counts.size() : 0;
  Progress progress("calibrate",
                    1 + layer_search_evaluations(method, candidates.size(), max_count) + one_shot_sets);
  size_t done = 0;
  const auto loss_of = [&](const std::vector<uint32_t>& layers) {
    const double loss = calibration_loss(tf, slice, policy_specs(o, layers));
    progress.update(++done, cat("[", join_layers(layers), "] PPL ", std::exp(loss)));
    return loss;
  };
  const double dense_loss = loss_of({});
  const LayerSearchResult r = search_layers(method, candidates, max_count, loss_of);

  std::vector<LayerProfile> profiles;
  std::vector<double> profile_ppl;
  for (size_t i = 0; i < counts.size(); ++i) {
    LayerProfile p;
    p.model_name = model->config().name;
    p.model_hash = model_fingerprint(*model);
    p.policy = o.policy;
    p.method = o.method;
    p.layers.assign(r.order.begin(), r.order.begin() + static_cast<std::ptrdiff_t>(counts[i]));
    std::sort(p.layers.begin(), p.layers.end());
    if (o.policy == "orthorank") p.ratio = o.ratio;
    p.sparsity = o.sparsities[i];
    // The chosen set's loss: a trial of the iterative search; a one-shot search never tried it.
    const auto tried = std::find_if(r.trials.begin(), r.trials.end(),
                                    [&](const LayerTrial& t) { return t.layers == p.layers; });
    profile_ppl.push_back(std::exp(tried != r.trials.end() ? tried->loss : loss_of(p.layers)));
    profiles.push_back(std::move(p));
  }
  progress.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  nlohmann::ordered_json trials = nlohmann::ordered_json::array();
  for (const LayerTrial& t : r.trials) trials.push_back({{"layers", t.layers}, {"ppl", std::exp(t.loss)}});
  nlohmann::ordered_json report = nlohmann::ordered_json::array();
  for (size_t i = 0; i < profiles.size(); ++i) {
    const LayerProfile& p = profiles[i];
    nlohmann::ordered_json calib = slice_json(slice);
    calib.update(nlohmann::ordered_json{
        {"objective", "mean NLL, every token of a window but its first"},
        {"candidates", candidates},
        {"order", r.order},
        {"achieved_sparsity", double(p.layers.size()) * (1.0 - kept) / double(n_layers)},
        {"dense_ppl", std::exp(dense_loss)},
        {"ppl", profile_ppl[i]},
        {"trials", trials},
        {"seconds", seconds},
        {"threads", pool.size()},
    });
    LayerProfile written = p;
    written.calibration_json = calib.dump();
    write_layer_profile(o.outputs[i], written);
    report.push_back({{"profile", o.outputs[i]},
                      {"sparsity", p.sparsity},
                      {"layers", p.layers},
                      {"calibration_ppl", profile_ppl[i]}});
    if (!o.json)
      std::printf("%s %s search, sparsity %g: layers [%s], calibration PPL %.4f (dense %.4f) -> %s\n",
                  p.policy.c_str(), p.method.c_str(), p.sparsity, join_layers(p.layers).c_str(),
                  profile_ppl[i], std::exp(dense_loss), o.outputs[i].c_str());
  }
  if (o.json) {
    nlohmann::ordered_json j = {{"policy", o.policy}, {"method", o.method},
                                {"order", r.order},   {"dense_ppl", std::exp(dense_loss)},
                                {"profiles", report}, {"seconds", seconds}};
    if (o.policy == "orthorank") j["ratio"] = o.ratio;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("taken in the order %s; %zu evaluations of %zu x %zu tokens in %.0f s\n",
                join_layers(r.order).c_str(), done, slice.windows, slice.ctx, seconds);
  }
}

}  // namespace

void register_calibrate(CLI::App& app) {
  auto opts = std::make_shared<CalibrateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "choose the layers of orthorank | sleb | shortened on WikiText-2 and write a layer profile, or find "
      "kvsink's outlier channel and static KV ranges and write a kvsink profile");
  cmd->add_option("policy", opts->policy, "orthorank | sleb | shortened | kvsink")
      ->required()
      ->check(CLI::IsMember({"orthorank", "sleb", "shortened", "kvsink"}));
  add_model_options(*cmd, opts->model, false);
  cmd->add_option(
         "--sparsity", opts->sparsities,
         "layer searches: token-layer sparsities to reach, e.g. 0.1 or 0.1,0.2 (one search serves them all)")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 0.95));
  cmd->add_option("--method", opts->method,
                  "sleb (iterative greedy) | shortened (one-shot PPL); default: the policy's own, sleb for "
                  "orthorank")
      ->check(CLI::IsMember({"sleb", "shortened"}));
  cmd->add_option("--ratio", opts->ratio, "orthorank: fraction of tokens that run its layers")
      ->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--calib-windows", opts->windows, "calibration windows (default 1)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--calib-ctx", opts->ctx, "tokens per calibration window (default 512)")
      ->check(CLI::Range(16, 1 << 20));
  add_data_dir_option(*cmd, opts->data_dir);
  add_outlier_probe_options(*cmd, opts->probe);
  cmd->add_option("-o,--output", opts->outputs,
                  "profile to write (JSON): one per sparsity, or the kvsink profile")
      ->required()
      ->delimiter(',');
  cmd->add_flag("--json", opts->json, "print one JSON object on stdout");
  cmd->callback([opts] { calibrate(*opts); });
}

}  // namespace ts::cli
