// tokensieve analyze outliers: the residual stream's stable outlier channels per decoder block
// (CSV or JSON), the sink channel and emergence layer, and which tokens KVSink keeps on the given
// texts. `tokensieve calibrate kvsink` (cmd_calibrate.cpp) writes the same findings as a profile.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/outliers.h"
#include "core/error.h"
#include "policies/kvquant/sink_preservation.h"
#include "runtime/policy_stack.h"

namespace ts::cli {
namespace {

// The two probe prompts of the KVSink paper (appendix D).
const char* const kPaperPrompts[] = {
    "The following are multiple choice questions (with answers) about machine learning.\n\n A 6-sided die is "
    "rolled 15 times and the results are: side 1 comes up 0 times;",
    "Summer is warm.\n Winter is cold.\n Spring is mild.\n Autumn is crisp.\n The sun rises early in the "
    "summer.\n The days are short in the winter.\n "};

std::vector<std::vector<int32_t>> texts(const OutlierProbe& o, const Model& model) {
  std::vector<std::vector<int32_t>> t;
  if (o.prompts.empty() && o.file.empty())
    for (const char* p : kPaperPrompts) t.push_back(model.tokenizer().encode(p, o.bos, false));
  for (const std::string& p : o.prompts) t.push_back(model.tokenizer().encode(p, o.bos, false));
  if (!o.file.empty()) {
    std::ifstream f(o.file);
    TS_CHECK(f, o.file, ": cannot read");
    std::stringstream ss;
    ss << f.rdbuf();
    std::vector<int32_t> ids = model.tokenizer().encode(ss.str(), o.bos, false);
    if (ids.size() > o.file_tokens) ids.resize(o.file_tokens);
    t.push_back(std::move(ids));
  }
  for (const auto& x : t) TS_CHECK(x.size() >= 2, "outliers: a text has fewer than 2 tokens");
  return t;
}

// The positions KVSink keeps on one text (the policy itself, on a dense cache).
std::vector<uint32_t> sink_positions(const Model& model, ThreadPool& pool, const std::vector<int32_t>& text,
                                     const OutlierProfile& p, size_t k) {
  PolicyOptions opts(
      PolicySpec::parse("kvsink:k=" + std::to_string(k) + ",layer=" + std::to_string(p.emergence_layer) +
                        ",channel=" + std::to_string(p.channel)),
      KvSink::options());
  auto owned = std::make_unique<KvSink>(opts);
  KvSink* sink = owned.get();
  std::vector<std::unique_ptr<Policy>> ps;
  ps.push_back(std::move(owned));
  Transformer tf(model, pool, text.size());
  tf.set_policies(std::make_unique<PolicyStack>(std::move(ps), model));
  tf.forward(text, false);
  return sink->sinks();
}

struct OutlierOptions {
  ModelOptions model;
  OutlierProbe probe;
  bool json = false;
};

void run(const OutlierOptions& o) {
  auto model = Model::load(o.model.model_path);
  ThreadPool pool(o.model.threads);
  const OutlierFindings f = find_outliers(o.probe, *model, pool);
  const OutlierProfile& p = f.profile;
  if (o.json) {
    nlohmann::json layers = nlohmann::json::array();
    for (const BlockOutliers& b : p.layers)
      for (size_t r = 0; r < std::min(o.probe.top, b.top.size()); ++r)
        layers.push_back({{"layer", b.layer},
                          {"rank", r},
                          {"channel", b.top[r].channel},
                          {"max_abs", b.top[r].max_abs},
                          {"position", b.top[r].position},
                          {"median_abs", b.median_abs}});
    std::printf("%s\n", nlohmann::json({{"emergence_layer", p.emergence_layer},
                                        {"channel", p.channel},
                                        {"channels", p.channels},
                                        {"layers", layers},
                                        {"sinks", f.sinks}})
                            .dump()
                            .c_str());
    return;
  }
  std::printf("layer,rank,channel,max_abs,position,median_abs\n");
  for (const BlockOutliers& b : p.layers)
    for (size_t r = 0; r < std::min(o.probe.top, b.top.size()); ++r)
      std::printf("%u,%zu,%u,%.4g,%u,%.4g\n", b.layer, r, b.top[r].channel, b.top[r].max_abs,
                  b.top[r].position, b.median_abs);
  std::fprintf(stderr, "sink channel %u, emergence layer %u; KVSink-%zu keeps %s\n", p.channel,
               p.emergence_layer, o.probe.sinks, f.sinks.dump().c_str());
}

}  // namespace

void add_outlier_probe_options(CLI::App& cmd, OutlierProbe& o) {
  cmd.add_option("--prompt", o.prompts,
                 "text to probe for outliers, repeatable (default: the KVSink paper's two prompts)");
  cmd.add_option("-f,--file", o.file, "also probe the first --file-tokens tokens of this text file");
  cmd.add_option("--file-tokens", o.file_tokens, "tokens of --file (default 512)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--top", o.top, "channels kept per block (default 4)")->check(CLI::PositiveNumber);
  cmd.add_option("--sinks", o.sinks, "KVSink's k: the tokens it keeps (default 5)");
  cmd.add_flag("--bos", o.bos, "start each probe text with BOS (default: none, as the paper)");
}

OutlierFindings find_outliers(const OutlierProbe& o, const Model& model, ThreadPool& pool) {
  const auto t = texts(o, model);
  OutlierFindings f{choose_sink_channel(model, measure_outliers(model, pool, t, std::max<size_t>(o.top, 3))),
                    nlohmann::json::array()};
  for (const auto& text : t) {
    nlohmann::json one = nlohmann::json::array();
    for (uint32_t pos : sink_positions(model, pool, text, f.profile, o.sinks))
      one.push_back({{"position", pos}, {"token", model.tokenizer().decode({text[pos]})}});
    f.sinks.push_back(one);
  }
  return f;
}

void register_outliers(CLI::App& app) {
  auto a = std::make_shared<OutlierOptions>();
  CLI::App* outliers = app.get_subcommand("analyze")->add_subcommand(
      "outliers",
      "per-block top |h| channels of the residual stream (CSV), KVSink's choice (calibrate kvsink writes "
      "the profile)");
  add_model_options(*outliers, a->model, false);
  add_outlier_probe_options(*outliers, a->probe);
  outliers->add_flag("--json", a->json, "print one JSON object on stdout");
  outliers->callback([a] { run(*a); });
}

}  // namespace ts::cli
