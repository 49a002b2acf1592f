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

PolicyRegistry build_registry() {
  PolicyRegistry r;
  r.add(
      {"orthorank",
       "layers=LIST|profile=FILE[,ratio=0.333][,select=ortho|reverse|random][,seed=N][,stage=normed|residual]"
       "[,kv=all|selected]: in those layers only the tokens most orthogonal to the sink run the layer",
       make<OrthoRank>});
  r.add({"sleb", "layers=LIST|profile=FILE: remove those layers (SLEB's search)", make<LayerRemoval>});
  r.add({"shortened", "layers=LIST|profile=FILE: remove those layers (Shortened LLaMA's one-shot search)",
         make<LayerRemoval>});
  r.add({"tokenfilter",
         "ratio=0.5[,tail=0.5][,placement=tail|head|uniform][,select=kv|k|v|random]"
         "[,fusion=printed|intent|mean][,anchor=ema|mean][,decay=0.9][,anchor_update=after|before]"
         "[,variance=instant|running][,update=eq4|alg1][,control=layer|global][,lr=0.01][,threshold=0.5]"
         "[,state=sequence|run][,decide=token|call][,kv=drop|cache][,seed=N]: Token Filtering, tokens whose "
         "K/V resemble the running anchors skip attention in the last tail fraction of layers",
         make<TokenFilter>});
  r.add({"attnremove",
         "ratio=R[,placement=tail|head][,kv=drop|cache]: no attention in the last (first) "
         "round(R*L) layers for any token; the FFN runs",
         make<AttentionRemoval>});
  // Paper 001's sparse-decode methods: per query head, budget(pos) = ceil((pos+1)*keep) keys plus
  // 4 sink positions, on layers >= 1 (policies/key_budget.h).
  const std::string common = "[,sinks=4][,first_layer=1]";
  r.add({"oracle",
         "keep=F" + common + ": each query head attends to its keep fraction of keys with the largest q.k",
         make<OracleKeys>});
  r.add({"h2o",
         "keep=F[,shared=0|1]" + common +
             ": H2O, evicting per head (shared=1: per KV head's group) by accumulated attention, half the "
             "budget recent",
         make<H2OKeys>});
  r.add({"snapkv",
         "keep=F[,window=32][,pool=7][,shared=0|1]" + common +
             ": SnapKV, evicting per head (shared=1: per KV head's group) by the observation window's pooled "
             "attention",
         make<SnapKVKeys>});
  r.add({"quest",
         "keep=F[,page=16][,shared=0|1]" + common +
             ": Quest, query-aware selection of pages by min/max key bounds (shared=1: one selection per KV "
             "head's group)",
         make<QuestKeys>});
  r.add(
      {"tokenbutler",
       "keep=F,predictor=FILE[,recent=0][,shared=0|1][,keys=f16|i8]" + common +
           ": TokenButler, each query head (shared=1: each KV head's group) attends to the keys its trained "
           "predictor scores highest",
       make<TokenButlerKeys>});
  r.add({"streaming", "window=N|keep=F" + common + ": StreamingLLM, sink positions plus a recent window",
         make<StreamingKeys>});
  r.add(
      {"zipvl",
       "[tau=0.975][,probes=128|all][,score=normalized|sum][,seed=N][,keep_last=0|1][,prefill=sparse|dense]"
       "[,mixed=1[,high=4|8|16][,low=2][,group=128]]: per layer only the prompt tokens holding tau of the "
       "(probe-estimated) attention run attention and stay in the KV cache (mixed=1: the others stay at low "
       "precision)",
       [](PolicyOptions& o) { return std::make_unique<ZipVL>(o, ZipVL::Budget::Tau); }});
  r.add({"fixedratio",
         "keep=R[,after=2][,probes=128|all][,score=normalized|sum][,seed=N][,keep_last=0|1][,prefill=..]"
         "[,mixed=1,..]: ZipVL's "
         "selection with a fixed kept fraction in every layer from `after` on (FastV-style baseline)",
         [](PolicyOptions& o) { return std::make_unique<ZipVL>(o, ZipVL::Budget::Fixed); }});
  r.add({"kvquant",
         "bits=8|4|2[,group=128][,mode=token|kivi][,residual=0][,prefill=full|quantized][,ranges=dynamic|"
         "static,"
         "profile=FILE[,excluding=kvsink|pfn|none]]: low-bit KV cache (asymmetric RTN; values per token, "
         "keys per "
         "token or per channel as KIVI; ranges per group, or calibrated by tokensieve calibrate kvsink)",
         make<KvQuant>});
  r.add({"pfn", "n=N: Preserve-First-N, positions 0..N-1 keep full-precision K/V under kvquant",
         make<PreserveFirstN>});
  r.add({"kvsink",
         "k=5,profile=FILE|layer=L,channel=C: KVSink, the k prefill tokens with the largest |h[:, C]| after "
         "block "
         "L keep full-precision K/V in later layers under kvquant (profile: tokensieve calibrate kvsink -o "
         "FILE)",
         make<KvSink>});
  return r;
}

}  // namespace

const PolicyRegistry& builtin_policies() {
  static const PolicyRegistry registry = build_registry();
  return registry;
}

std::unique_ptr<PolicyStack> make_policy_stack(std::span<const std::string> specs, const Model& model) {
  if (specs.empty()) return nullptr;
  std::vector<std::unique_ptr<Policy>> policies;
  for (const std::string& spec : specs) policies.push_back(builtin_policies().create(spec));
  return std::make_unique<PolicyStack>(std::move(policies), model);
}

}  // namespace ts
