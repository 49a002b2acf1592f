#include "policies/builtin_policies.h"

#include "policies/h2o/h2o.h"
#include "policies/kvquant/kvquant.h"
#include "policies/kvquant/sink_preservation.h"
#include "policies/oracle/oracle.h"
#include "policies/orthorank/orthorank.h"
#include "policies/quest/quest.h"
#include "policies/sleb/layer_removal.h"
#include "policies/snapkv/snapkv.h"
#include "policies/streaming/streaming.h"
#include "policies/token_filter/attention_removal.h"
#include "policies/token_filter/token_filter.h"
#include "policies/tokenbutler/tokenbutler.h"
#include "policies/zipvl/zipvl.h"

namespace ts {
namespace {

template <typename P>
std::unique_ptr<Policy> make(PolicyOptions& options) {
  return std::make_unique<P>(options);
}

template <typename P>
PolicyEntry entry(std::string name, std::string class_name, std::string summary) {
  return {std::move(name), std::move(class_name), std::move(summary), P::options(), make<P>};
}

PolicyEntry zipvl_entry(std::string name, std::string class_name, std::string summary, ZipVL::Budget budget) {
  return {std::move(name), std::move(class_name), std::move(summary), ZipVL::options(budget),
          [budget](PolicyOptions& o) { return std::make_unique<ZipVL>(o, budget); }};
}

// Each policy declares its options (P::options()); here only its name, Python class and summary.
PolicyRegistry build_registry() {
  PolicyRegistry r;
  r.add(entry<OrthoRank>(
      "orthorank", "OrthoRank",
      "paper 000: in the chosen layers only the tokens most orthogonal to the sink run the layer"));
  r.add(entry<LayerRemoval>("sleb", "SLEB", "remove the chosen layers (SLEB's search)"));
  r.add(entry<LayerRemoval>("shortened", "Shortened",
                            "remove the chosen layers (Shortened LLaMA's one-shot search)"));
  r.add(entry<TokenFilter>("tokenfilter", "TokenFilter",
                           "paper 003: tokens whose K/V resemble the running anchors skip attention in the "
                           "filtered layers"));
  r.add(entry<AttentionRemoval>(
      "attnremove", "AttentionRemoval",
      "no attention in the last (first) round(ratio*L) layers for any token; the FFN runs"));
  // Paper 001's sparse-decode methods: per query head, budget(pos) = ceil((pos+1)*keep) keys plus
  // the sink positions, on layers >= first_layer (policies/key_budget.h).
  r.add(entry<OracleKeys>("oracle", "Oracle",
                          "each query head attends to its keep fraction of keys with the largest q.k"));
  r.add(entry<H2OKeys>("h2o", "H2O",
                       "H2O: evicting per head by accumulated attention, half the budget recent"));
  r.add(entry<SnapKVKeys>("snapkv", "SnapKV",
                          "SnapKV: evicting per head by the observation window's pooled attention"));
  r.add(entry<QuestKeys>("quest", "Quest", "Quest: query-aware selection of pages by min/max key bounds"));
  r.add(entry<TokenButlerKeys>(
      "tokenbutler", "TokenButler",
      "paper 001: each query head attends to the keys its trained predictor scores highest"));
  r.add(entry<StreamingKeys>("streaming", "StreamingLLM",
                             "StreamingLLM: the sink positions plus a recent window"));
  r.add(zipvl_entry(
      "zipvl", "ZipVL",
      "paper 004: per layer only the prompt tokens holding tau of the (probe-estimated) attention "
      "run attention and stay in the KV cache",
      ZipVL::Budget::Tau));
  r.add(zipvl_entry(
      "fixedratio", "FixedRatio",
      "ZipVL's selection with a fixed kept fraction in every layer from `after` on (FastV-style baseline)",
      ZipVL::Budget::Fixed));
  r.add(entry<KvQuant>(
      "kvquant", "KVQuant",
      "low-bit KV cache (asymmetric RTN; values per token, keys per token or per channel as KIVI)"));
  r.add(entry<PreserveFirstN>("pfn", "PFN",
                              "Preserve-First-N: the first positions keep full-precision K/V under kvquant"));
  r.add(entry<KvSink>(
      "kvsink", "KVSink",
      "paper 002: the k prompt tokens with the largest outlier activation keep full-precision K/V "
      "under kvquant"));
  return r;
}

}  // namespace

const PolicyRegistry& builtin_policies() {
  static const PolicyRegistry registry = build_registry();
  return registry;
}

nlohmann::ordered_json describe_policies(const PolicyRegistry& registry) {
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (const PolicyEntry& e : registry.entries()) {
    nlohmann::ordered_json options = nlohmann::ordered_json::array();
    for (const PolicyOption& o : e.options) {
      nlohmann::ordered_json j = {
          {"key", o.key},
          {"type", o.type_name()},
          {"default", o.fallback.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(o.fallback)},
          {"help", o.help}};
      if (o.type == OptionType::Number || o.type == OptionType::Integer) {
        j["min"] = o.min;
        j["max"] = o.max;
      }
      if (o.type == OptionType::Choice) j["choices"] = o.choices;
      options.push_back(j);
    }
    entries.push_back({{"name", e.name},
                       {"class", e.class_name},
                       {"summary", e.summary},
                       {"usage", e.usage()},
                       {"options", options}});
  }
  return entries;
}

std::unique_ptr<PolicyStack> make_policy_stack(std::span<const std::string> specs, const Model& model) {
  if (specs.empty()) return nullptr;
  std::vector<std::unique_ptr<Policy>> policies;
  for (const std::string& spec : specs) policies.push_back(builtin_policies().create(spec));
  return std::make_unique<PolicyStack>(std::move(policies), model);
}

}  // namespace ts
