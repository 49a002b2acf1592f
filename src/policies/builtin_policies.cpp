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
      "OrthoRank (paper 000): in the chosen layers only the tokens most orthogonal to the sink "
      "(smallest |cos(h0, hi)| after RMSNorm) run the layer; the others keep their state and "
      "only write K/V"));
  r.add(entry<LayerRemoval>("sleb", "SLEB", "SLEB baseline: the chosen layers removed (SLEB's search)"));
  r.add(entry<LayerRemoval>("shortened", "Shortened",
                            "Shortened-LLaMA baseline: the chosen layers removed (its one-shot search)"));
  r.add(
      entry<TokenFilter>("tokenfilter", "TokenFilter",
                         "Token Filtering (paper 003): in the filtered layers, tokens whose K/V resemble the "
                         "running anchors skip attention"));
  r.add(entry<AttentionRemoval>(
      "attnremove", "AttentionRemoval",
      "Token Filtering's baseline: no attention in the last (first) round(ratio*L) layers "
      "for any token; the FFN runs"));
  // Paper 001's sparse-decode methods: per query head, budget(pos) = ceil((pos+1)*keep) keys plus
  // the sink positions, on layers >= first_layer (policies/key_budget.h).
  r.add(entry<OracleKeys>(
      "oracle", "Oracle",
      "key-selecting baseline: each query head attends to its keep fraction of keys with the "
      "largest q.k"));
  r.add(entry<H2OKeys>("h2o", "H2O",
                       "evicting baseline H2O: per head by accumulated attention, half the budget recent "
                       "(shared=1: per KV group, its attention summed, so the group reads one list)"));
  r.add(entry<SnapKVKeys>("snapkv", "SnapKV",
                          "evicting baseline SnapKV: per head by the observation window's pooled attention"));
  r.add(entry<QuestKeys>("quest", "Quest",
                         "key-selecting baseline Quest: query-aware selection of pages by min/max key bounds "
                         "(shared=1: one choice per KV group, the fast one)"));
  r.add(entry<TokenButlerKeys>(
      "tokenbutler", "TokenButler",
      "TokenButler (paper 001): each query head (shared=1: each KV group) attends to the "
      "keys its trained predictor (predictors/) scores highest"));
  r.add(entry<StreamingKeys>("streaming", "StreamingLLM",
                             "evicting baseline StreamingLLM: the sink positions plus a recent window"));
  r.add(
      zipvl_entry("zipvl", "ZipVL",
                  "ZipVL (paper 004): per layer only the prompt tokens holding tau of the (probe-estimated) "
                  "attention run attention and stay in the KV cache (mixed=1: the others at low precision)",
                  ZipVL::Budget::Tau));
  r.add(
      zipvl_entry("fixedratio", "FixedRatio",
                  "ZipVL's selection with a fixed kept fraction in every layer from `after` on (FastV-style "
                  "baseline)",
                  ZipVL::Budget::Fixed));
  r.add(
      entry<KvQuant>("kvquant", "KVQuant",
                     "low-bit KV cache (asymmetric round-to-nearest; keys per token or per channel as KIVI); "
                     "4- and 2-bit keys are scored in integers against the query rounded to 8 bits"));
  r.add(entry<PreserveFirstN>(
      "pfn", "PFN", "Preserve-First-N baseline: positions 0..n-1 keep full-precision K/V under kvquant"));
  r.add(entry<KvSink>(
      "kvsink", "KVSink",
      "KVSink (paper 002): the k prompt tokens with the largest outlier-channel activation keep "
      "full-precision K/V under kvquant (tokensieve calibrate kvsink)"));
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
          {"usage", o.usage()},
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
