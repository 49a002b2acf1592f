#pragma once
// Token-sparsification policies: the hooks through which a method changes the forward pass.
//
// A policy is a small class that overrides the hook its method needs and claims it for the layers
// it acts on (claims()). Within one layer the forward pass calls, in this order:
//   1. observe_layer_input  h and RMSNorm_attn(h) of every token            (analysis, KVSink)
//   2. select_tokens        which tokens run the layer; the rest pass h through unchanged but
//                           still write their K/V unless the policy says so  (OrthoRank, SLEB)
//   3. skip_attention       which running tokens skip Q/attention/O; their FFN still runs, their
//                           K/V enter the cache or not       (Token Filtering; ZipVL from probe queries)
//   4. choose_kv_storage    each written token's K/V storage                  (KVSink, PFN, KIVI)
//   5. observe_kv           the post-RoPE K and V being written               (Quest, anchors)
//   6. observe_queries      the post-RoPE queries of the attending rows       (TokenButler training)
//   7. select_keys          per query head, the cached keys a query attends   (TokenButler, Oracle, Quest),
//                           after prepare_keys saw all the layer's queries    (ZipVL's probe attention)
//   8. observe_attention    attention probabilities of the attending rows     (H2O, SnapKV)
// and once per forward call, after the last layer:
//   9. evict                cached positions a layer forgets                  (H2O, StreamingLLM, ZipVL)
// Decision hooks (2, 3, 4, 7, 9) have at most one policy per layer; two policies claiming the same
// decision on one layer is an error. Observation hooks (1, 5, 6, 8) take any number, called in the
// order the policies were given. Unclaimed hooks are never called, so the forward pass without
// policies is the dense engine, bit for bit.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/kv_cache.h"
#include "runtime/policy_spec.h"
#include "runtime/row_set.h"

namespace ts {

class Model;
class ThreadPool;

enum class Hook : uint8_t {
  // decisions: one owner per layer
  SelectTokens,
  SkipAttention,
  KvStorage,
  SelectKeys,
  Evict,
  // observations: any number of policies
  ObserveLayerInput,
  ObserveKv,
  ObserveQueries,
  ObserveAttention,
};
inline constexpr size_t kHookCount = static_cast<size_t>(Hook::ObserveAttention) + 1;  // the last hook
const char* hook_name(Hook h);
inline bool is_decision(Hook h) { return h < Hook::ObserveLayerInput; }

struct HookClaim {
  Hook hook;
  std::vector<uint32_t> layers;  // empty: every layer
};

// One forward batch at one layer, as policies see it. Row t of the batch is position pos0 + t;
// pos0 == 0 starts a sequence.
struct LayerInput {
  size_t layer = 0;
  size_t pos0 = 0;
  size_t n_tok = 0;
  size_t dim = 0;
  const float* residual = nullptr;  // [n_tok][dim] h: the layer's input, the residual stream
  // [n_tok][dim] RMSNorm_attn(h), gain included: the input of Q, K, V. nullptr when no policy of
  // the stack reads it (Policy::reads_normed_input).
  const float* normed = nullptr;

  std::span<const float> residual_row(size_t t) const { return {residual + t * dim, dim}; }
  std::span<const float> normed_row(size_t t) const { return {normed + t * dim, dim}; }
};

// select_tokens' answer; the forward pass presets every row.
struct TokenSelection {
  std::vector<uint32_t> rows;  // batch rows that run attention and FFN, ascending
  bool kv_for_unselected =
      true;                   // false: the other rows compute no K/V and leave holes in this layer's cache
  std::vector<float> scores;  // optional, one per batch row: what the choice ranked (for the decision log)
};

// The K and V being written at one layer, post-RoPE as cached; compact row i is batch row rows[i].
struct KvRows {
  size_t layer = 0;
  size_t pos0 = 0;
  const RowSet* rows = nullptr;
  size_t kv_dim = 0, head_dim = 0;
  const float* keys = nullptr;    // [rows.size()][kv_dim]
  const float* values = nullptr;  // [rows.size()][kv_dim]
  // The same rows' post-RoPE queries, [rows.size()][n_heads * head_dim], when the layer's
  // skip_attention owner reads them (Policy::skips_by_queries); else nullptr.
  const float* queries = nullptr;
  size_t n_heads = 0;
  ThreadPool* pool = nullptr;  // the forward pass's threads, for work that splits by head
};

// skip_attention's answer, one entry per running row (LayerRows::ffn order), preset to 0.
struct AttentionSkips {
  std::vector<uint8_t> skip;     // 1: this row skips Q/attention/O
  bool cache_skipped_kv = true;  // false: the skipped rows' K/V are not cached (KvStorage::Dropped)
};

// The post-RoPE queries of the rows about to attend at one layer; compact row i is batch row rows[i].
struct QueryRows {
  size_t layer = 0;
  size_t pos0 = 0;
  const RowSet* rows = nullptr;
  size_t n_heads = 0, head_dim = 0;
  const float* queries = nullptr;  // [rows.size()][n_heads * head_dim]
  const KvCache* cache = nullptr;
  ThreadPool* pool = nullptr;  // the forward pass's threads, for work that splits by head

  std::span<const float> query(size_t i, size_t h) const {
    return {queries + (i * n_heads + h) * head_dim, head_dim};
  }
};

// The query of one (token, query head), for select_keys; of one (token, KV head) when the
// selector shares its choice across the group: then head is the group's first query head and q
// holds the group's n_heads queries.
struct KeyQuery {
  size_t layer = 0;
  size_t pos = 0;  // the token's position; candidate keys are <= pos
  size_t head = 0, kv_head = 0;
  std::span<const float> q;  // post-RoPE
  const KvCache* cache = nullptr;
  size_t n_heads = 1;
};

// The attention of the rows that attended at one layer: for compact row i (batch row rows[i]) and
// query head h, the key positions read (ascending) and their softmax probabilities.
struct AttentionRows {
  size_t layer = 0;
  size_t pos0 = 0;
  size_t n_heads = 0;
  const RowSet* rows = nullptr;
  std::span<const std::span<const uint32_t>> keys;  // [row * n_heads + head]
  std::span<const std::vector<float>> probs;        // same layout; empty unless a policy observes attention

  std::span<const uint32_t> keys_of(size_t i, size_t h) const { return keys[i * n_heads + h]; }
  std::span<const float> probs_of(size_t i, size_t h) const { return probs[i * n_heads + h]; }
};

// Whether evicting `n` of a layer's `held` positions is worth it now: each eviction moves the
// layer's kept rows down, so fewer than 64 positions, or than a quarter of those held, wait.
inline bool worth_evicting(size_t n, size_t held) { return n >= 64 && n >= held / 4; }

// evict's answer: positions each layer forgets.
struct Evictions {
  std::vector<std::pair<uint32_t, std::vector<uint32_t>>> by_layer;
  void add(uint32_t layer, std::vector<uint32_t> positions) {
    by_layer.emplace_back(layer, std::move(positions));
  }
};

class Policy {
 public:
  explicit Policy(PolicySpec spec) : spec_(std::move(spec)) {}
  virtual ~Policy() = default;
  Policy(const Policy&) = delete;
  Policy& operator=(const Policy&) = delete;

  const std::string& name() const { return spec_.name; }
  std::string describe() const { return spec_.text(); }

  // Checks the options against the model and reads any profile; claims() is asked afterwards.
  virtual void bind(const Model&) {}
  virtual std::vector<HookClaim> claims() const = 0;
  // The KV cache format this policy runs with (kvquant); at most one policy of a stack sets one.
  virtual std::optional<KvFormat> kv_format() const { return std::nullopt; }
  // True when a token's decision depends on the other tokens of the same call (OrthoRank ranks
  // the whole prompt): the forward pass then runs each call as one batch.
  virtual bool ranks_whole_calls() const { return false; }
  // Whether a hook reads LayerInput::normed (OrthoRank's scores, TokenButler's predictor). The
  // forward pass then keeps every row's attention-input norm through the layer; without such a
  // policy it norms rows pass by pass, so that a call ranked whole holds no prompt-sized copy.
  virtual bool reads_normed_input() const { return true; }
  // The longest prefix, at most n positions, that the policy's state can be truncated to exactly:
  // a call reusing another's cached prefix starts there and recomputes the rest. 0 when the state
  // cannot be rewound at all (an eviction simulation; a policy ranking whole calls cannot resume
  // from a prefix either); less than n when it keeps its history only at checkpoints.
  virtual size_t rewind_point(size_t n) const { return ranks_whole_calls() ? 0 : n; }
  // Positions >= n_past are forgotten (0: a new sequence starts); n_past is 0, a rewind_point
  // answer, or at least the positions seen.
  virtual void truncate(size_t /*n_past*/) {}

  virtual void observe_layer_input(const LayerInput&) {}
  virtual void select_tokens(const LayerInput&, TokenSelection&) {}
  virtual void skip_attention(const LayerInput&, const KvRows&, const RowSet& /*running*/, AttentionSkips&) {}
  // True when skip_attention decides from the queries (ZipVL's probe attention): the layer then
  // projects Q for every K/V row before the decision, and KvRows::queries holds them.
  virtual bool skips_by_queries() const { return false; }
  virtual void choose_kv_storage(const LayerInput&, const KvRows&, std::span<KvStorage> /*per kv row*/) {}
  virtual void observe_kv(const KvRows&) {}
  // The queries of the rows about to attend; attention itself stays as it was (dense when no
  // policy selects keys).
  virtual void observe_queries(const QueryRows&) {}
  // Before select_keys, with the queries about to attend: every row of the layer's batch, or, in
  // a long batch, each chunk of its rows in order, then that chunk's select_keys and
  // observe_attention (so that the lists held at once are a chunk's).
  virtual void prepare_keys(const QueryRows&) {}
  // Writes into `keys` the positions (ascending, a subset of `candidates`: the positions this layer
  // holds up to q.pos) that the query attends to. Called from worker threads at once: const.
  virtual void select_keys(const KeyQuery&, std::span<const uint32_t> /*candidates*/,
                           std::vector<uint32_t>& /*keys*/) const {}
  // True: select_keys is asked once per (token, KV head) and its keys serve every query head of
  // the group, so each key row is gathered once for the group (as dense attention reads it).
  virtual bool selects_per_group() const { return false; }
  virtual void observe_attention(const AttentionRows&) {}
  // Whether the next observe_attention at this layer (after prepare_keys) reads the attention
  // probabilities: when no observer does, the runtime does not collect them (a prompt's are
  // rows × keys floats per head).
  virtual bool wants_attention(size_t /*layer*/) const { return true; }
  virtual void evict(const KvCache&, Evictions&) {}

 private:
  PolicySpec spec_;
};

}  // namespace ts
