// The forward pass with policies on the real stories260K model: ratio 1 equals dense bit for bit,
// token subsets keep unselected tokens' residual and write their K/V, skipped layers, key lists,
// attention skips, evictions, composition rules and the decision log.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "policies/builtin_policies.h"
#include "runtime/kv_cache.h"
#include "runtime/transformer.h"
#include "stories_fixture.h"

namespace ts {
namespace {

// Test policies: each claims one hook on the given layers.
class FixedRows final : public Policy {
 public:
  FixedRows(std::vector<uint32_t> layers, std::vector<uint32_t> rows, bool kv_for_unselected)
      : Policy({"fixed_rows", {}}),
        layers_(std::move(layers)),
        rows_(std::move(rows)),
        kv_(kv_for_unselected) {}
  std::vector<HookClaim> claims() const override { return {{Hook::SelectTokens, layers_}}; }
  void select_tokens(const LayerInput& in, TokenSelection& out) override {
    out.rows.clear();
    for (uint32_t r : rows_)
      if (r < in.n_tok) out.rows.push_back(r);
    out.kv_for_unselected = kv_;
  }

 private:
  std::vector<uint32_t> layers_, rows_;
  bool kv_;
};

// Keeps the residual input of every layer of the last batch.
class InputRecorder final : public Policy {
 public:
  InputRecorder() : Policy({"inputs", {}}) {}
  std::vector<HookClaim> claims() const override { return {{Hook::ObserveLayerInput, {}}}; }
  void observe_layer_input(const LayerInput& in) override {
    inputs.resize(std::max(inputs.size(), in.layer + 1));
    inputs[in.layer].assign(in.residual, in.residual + in.n_tok * in.dim);
  }
  std::vector<std::vector<float>> inputs;
};

// The last `keep` candidate keys of every query; records attention probabilities.
class RecentKeys final : public Policy {
 public:
  explicit RecentKeys(size_t keep) : Policy({"recent", {}}), keep_(keep) {}
  std::vector<HookClaim> claims() const override {
    return {{Hook::SelectKeys, {}}, {Hook::ObserveAttention, {1}}};
  }
  void prepare_keys(const QueryRows& q) override {
    EXPECT_EQ(q.query(q.rows->size() - 1, q.n_heads - 1).size(), q.head_dim);
    prepared_rows += q.rows->size();
  }
  void select_keys(const KeyQuery&, std::span<const uint32_t> candidates,
                   std::vector<uint32_t>& keys) const override {
    const size_t n = std::min(keep_, candidates.size());
    keys.assign(candidates.end() - static_cast<std::ptrdiff_t>(n), candidates.end());
  }
  void observe_attention(const AttentionRows& a) override {
    for (size_t i = 0; i < a.rows->size(); ++i)
      for (size_t h = 0; h < a.n_heads; ++h) {
        ASSERT_EQ(a.keys_of(i, h).size(), std::min(keep_, a.pos0 + (*a.rows)[i] + 1));
        EXPECT_EQ(a.keys_of(i, h).back(), a.pos0 + (*a.rows)[i]);
        float sum = 0;
        for (float p : a.probs_of(i, h)) sum += p;
        // The numerators and their sum are both the kernel's, but summed in different orders.
        EXPECT_NEAR(sum, 1.0f, 5e-5f);
        ++rows_seen;
      }
  }
  size_t rows_seen = 0, prepared_rows = 0;

 private:
  size_t keep_;
};

// Keeps the queries every layer shows its observers, by position: [layer][pos][n_heads * head_dim].
class QueryRecorder final : public Policy {
 public:
  explicit QueryRecorder(Hook hook) : Policy({"queries", {}}), hook_(hook) {}
  std::vector<HookClaim> claims() const override { return {{hook_, {}}}; }
  void observe_queries(const QueryRows& q) override { record(q); }
  void prepare_keys(const QueryRows& q) override { record(q); }
  void select_keys(const KeyQuery&, std::span<const uint32_t> candidates,
                   std::vector<uint32_t>& keys) const override {
    keys.assign(candidates.begin(), candidates.end());
  }
  std::vector<std::vector<float>> queries;
  std::vector<std::vector<uint32_t>> positions;  // [layer]: the positions shown, in call order

 private:
  void record(const QueryRows& q) {
    const size_t width = q.n_heads * q.head_dim;
    queries.resize(std::max(queries.size(), q.layer + 1));
    positions.resize(queries.size());
    for (size_t i = 0; i < q.rows->size(); ++i) {
      const size_t pos = q.pos0 + (*q.rows)[i];
      positions[q.layer].push_back(static_cast<uint32_t>(pos));
      queries[q.layer].resize(std::max(queries[q.layer].size(), (pos + 1) * width));
      std::copy_n(q.queries + i * width, width, &queries[q.layer][pos * width]);
    }
  }
  Hook hook_;
};

// Keeps the probabilities layer 1 shows its observers on the last call, for every head.
class ProbabilityRecorder final : public Policy {
 public:
  ProbabilityRecorder() : Policy({"probabilities", {}}) {}
  std::vector<HookClaim> claims() const override { return {{Hook::ObserveAttention, {1}}}; }
  void observe_attention(const AttentionRows& a) override { probs.assign(a.probs.begin(), a.probs.end()); }
  std::vector<std::vector<float>> probs;
};

class SkipAllAttention final : public Policy {
 public:
  SkipAllAttention(uint32_t layer, bool cache_kv)
      : Policy({"skip", {}}), layer_(layer), cache_kv_(cache_kv) {}
  std::vector<HookClaim> claims() const override { return {{Hook::SkipAttention, {layer_}}}; }
  void skip_attention(const LayerInput&, const KvRows&, const RowSet&, AttentionSkips& out) override {
    std::fill(out.skip.begin(), out.skip.end(), 1);
    out.cache_skipped_kv = cache_kv_;
  }

 private:
  uint32_t layer_;
  bool cache_kv_;
};

class EvictAndPin final : public Policy {
 public:
  EvictAndPin() : Policy({"evict", {}}) {}
  std::vector<HookClaim> claims() const override { return {{Hook::Evict, {0}}, {Hook::KvStorage, {}}}; }
  void choose_kv_storage(const LayerInput& in, const KvRows& kv, std::span<KvStorage> storage) override {
    for (size_t i = 0; i < storage.size(); ++i)
      if (in.pos0 + (*kv.rows)[i] == 0) storage[i] = KvStorage::Full;
  }
  void evict(const KvCache&, Evictions& out) override { out.add(0, {1, 2}); }
};

std::unique_ptr<PolicyStack> stack_of(std::vector<std::unique_ptr<Policy>> policies) {
  return std::make_unique<PolicyStack>(std::move(policies), stories());
}

template <typename... P>
std::unique_ptr<PolicyStack> stack(std::unique_ptr<P>... p) {
  std::vector<std::unique_ptr<Policy>> v;
  (v.push_back(std::move(p)), ...);
  return stack_of(std::move(v));
}

std::vector<float> copy(std::span<const float> s) { return {s.begin(), s.end()}; }

TEST(PolicyRuntime, RatioOneEqualsDenseBitForBitInPrefillAndDecode) {
  const auto tokens = random_tokens(60, 1);
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    Transformer dense(stories(), pool, 64), policy(stories(), pool, 64);
    const std::string all_layers = "orthorank:layers=0-4,ratio=1";
    policy.set_policies(make_policy_stack(std::vector<std::string>{all_layers}, stories()));
    const auto prompt = std::span(tokens).first(50);
    EXPECT_EQ(copy(dense.forward(prompt, true)), copy(policy.forward(prompt, true))) << threads;
    for (size_t i = 50; i < tokens.size(); ++i) {
      const auto step = std::span(tokens).subspan(i, 1);
      ASSERT_EQ(copy(dense.forward(step, false)), copy(policy.forward(step, false))) << "position " << i;
    }
  }
}

TEST(PolicyRuntime, PassivePoliciesLeaveTheDenseResult) {
  const auto tokens = random_tokens(30, 2);
  ThreadPool pool(2);
  Transformer dense(stories(), pool, 32), observed(stories(), pool, 32);
  observed.set_policies(stack(std::make_unique<InputRecorder>()));
  EXPECT_EQ(copy(dense.forward(tokens, true)), copy(observed.forward(tokens, true)));
}

// Observing the queries leaves attention dense (bit for bit), and the observer sees the queries a key
// selector is given, in prefill and decode.
TEST(PolicyRuntime, ObservedQueriesAreTheSelectorsAndLeaveTheDenseResult) {
  const auto tokens = random_tokens(30, 3);
  ThreadPool pool(2);
  Transformer dense(stories(), pool, 32), observed(stories(), pool, 32), selected(stories(), pool, 32);
  auto observer = std::make_unique<QueryRecorder>(Hook::ObserveQueries);
  auto selector = std::make_unique<QueryRecorder>(Hook::SelectKeys);
  const QueryRecorder &o = *observer, &s = *selector;
  observed.set_policies(stack(std::move(observer)));
  selected.set_policies(stack(std::move(selector)));
  const auto prompt = std::span(tokens).first(25);
  EXPECT_EQ(copy(dense.forward(prompt, true)), copy(observed.forward(prompt, true)));
  selected.forward(prompt, true);
  for (size_t i = 25; i < tokens.size(); ++i) {
    const auto step = std::span(tokens).subspan(i, 1);
    ASSERT_EQ(copy(dense.forward(step, false)), copy(observed.forward(step, false))) << "position " << i;
    selected.forward(step, false);
  }
  const ModelConfig& c = stories().config();
  ASSERT_EQ(o.queries.size(), c.n_layers);
  ASSERT_EQ(s.queries.size(), c.n_layers);
  // Layer 0's queries come before any attention: equal. Later layers' inputs went through the two
  // attention implementations, which round differently (see SelectedKeysAndObservedAttention).
  EXPECT_EQ(o.queries[0], s.queries[0]);
  std::vector<uint32_t> every_position(tokens.size());
  std::iota(every_position.begin(), every_position.end(), 0u);
  for (size_t l = 0; l < c.n_layers; ++l) {
    EXPECT_EQ(o.positions[l], every_position) << l;  // each row once, prefill then decode
    ASSERT_EQ(o.queries[l].size(), tokens.size() * c.n_heads * c.head_dim) << l;
    ASSERT_EQ(s.queries[l].size(), o.queries[l].size()) << l;
    for (size_t j = 0; j < o.queries[l].size(); ++j)
      ASSERT_NEAR(o.queries[l][j], s.queries[l][j], 2e-2f) << l;
  }
}

// When a policy runs a subset at layer 2, the attending rows' queries are projected after K/V, on
// their own: the observer sees only the selected rows there, with the dense run's queries bit for bit
// (layers 0-1 are dense, and a product's row does not depend on the other rows).
TEST(PolicyRuntime, ObservedQueriesOfASubsetAreTheDenseOnes) {
  const auto tokens = random_tokens(40, 4);
  ThreadPool pool(2);
  Transformer dense(stories(), pool, 48), subset(stories(), pool, 48);
  auto all = std::make_unique<QueryRecorder>(Hook::ObserveQueries);
  auto some = std::make_unique<QueryRecorder>(Hook::ObserveQueries);
  const QueryRecorder &a = *all, &b = *some;
  dense.set_policies(stack(std::move(all)));
  std::vector<std::unique_ptr<Policy>> v;
  v.push_back(builtin_policies().create("orthorank:layers=2,ratio=0.5"));
  v.push_back(std::move(some));
  subset.set_policies(stack_of(std::move(v)));
  dense.forward(tokens, true);
  subset.forward(tokens, true);
  const size_t width = stories().config().n_heads * stories().config().head_dim;
  ASSERT_EQ(b.positions.size(), stories().config().n_layers);
  EXPECT_EQ(b.positions[1].size(), tokens.size());
  const std::vector<uint32_t>& ran = b.positions[2];
  ASSERT_EQ(ran.size(), tokens.size() / 2);
  for (uint32_t pos : ran)
    ASSERT_TRUE(
        std::equal(&b.queries[2][pos * width], &b.queries[2][(pos + 1) * width], &a.queries[2][pos * width]))
        << "position " << pos;
}

// A subset at layer 2 (layers 0-1 dense): unselected tokens leave layer 2 as they entered it, the
// selected ones as in the dense run, and every token's K/V at layer 2 are the dense ones. Bit for
// bit: with float weights no row's products depend on the other rows of the batch.
TEST(PolicyRuntime, SubsetRunMatchesDenseOnItsTokensAndKeepsTheOthers) {
  const auto tokens = random_tokens(12, 3);
  const std::vector<uint32_t> selected{1, 4, 5, 9};
  ThreadPool pool(2);
  Transformer dense(stories(), pool, 16), subset(stories(), pool, 16);
  auto dense_rec = std::make_unique<InputRecorder>();
  auto subset_rec = std::make_unique<InputRecorder>();
  InputRecorder& d = *dense_rec;
  InputRecorder& s = *subset_rec;
  dense.set_policies(stack(std::move(dense_rec)));
  subset.set_policies(
      stack(std::make_unique<FixedRows>(std::vector<uint32_t>{2}, selected, true), std::move(subset_rec)));
  dense.forward(tokens, false);
  subset.forward(tokens, false);

  const size_t dim = stories().config().n_embd, kv = subset.cache().kv_dim();
  ASSERT_EQ(s.inputs[2], d.inputs[2]);
  for (size_t t = 0; t < tokens.size(); ++t) {
    const bool sel = std::find(selected.begin(), selected.end(), t) != selected.end();
    for (size_t j = 0; j < dim; ++j) {
      const float out = s.inputs[3][t * dim + j];
      if (sel) {
        ASSERT_EQ(out, d.inputs[3][t * dim + j]) << "token " << t;
      } else {
        ASSERT_EQ(out, s.inputs[2][t * dim + j]) << "token " << t;
      }
    }
    std::vector<float> a(kv), b(kv);
    subset.cache().read_key(2, t, a.data());
    dense.cache().read_key(2, t, b.data());
    ASSERT_EQ(a, b) << "token " << t;
    subset.cache().read_value(2, t, a.data());
    dense.cache().read_value(2, t, b.data());
    ASSERT_EQ(a, b) << "token " << t;
  }
  EXPECT_TRUE(subset.cache().holds_all(2));
}

TEST(PolicyRuntime, TokensWithoutKvLeaveHolesThatAttentionSkips) {
  const auto tokens = random_tokens(12, 4);
  ThreadPool pool(2);
  Transformer tf(stories(), pool, 32);
  tf.set_policies(
      stack(std::make_unique<FixedRows>(std::vector<uint32_t>{2}, std::vector<uint32_t>{0, 3, 7}, false)));
  tf.forward(tokens, false);
  EXPECT_FALSE(tf.cache().holds_all(2));
  const auto held = tf.cache().held(2, tf.n_past() - 1);
  EXPECT_EQ(std::vector<uint32_t>(held.begin(), held.end()), (std::vector<uint32_t>{0, 3, 7}));
  EXPECT_EQ(tf.cache().held(2, 5).size(), 2u);
  EXPECT_TRUE(tf.cache().holds_all(1));
  // Decoding on: the new token (row 0 of its batch) is selected and stored.
  const std::span<const float> logits = tf.forward(random_tokens(1, 5), false);
  EXPECT_TRUE(std::all_of(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); }));
  EXPECT_EQ(tf.cache().held(2, tf.n_past() - 1).size(), 4u);
  tf.truncate(0);
  EXPECT_TRUE(tf.cache().holds_all(2));
}

TEST(PolicyRuntime, SlebPassesTheResidualThroughAndWritesNoKv) {
  const auto tokens = random_tokens(10, 6);
  ThreadPool pool(2);
  Transformer tf(stories(), pool, 16);
  auto rec = std::make_unique<InputRecorder>();
  InputRecorder& r = *rec;
  std::vector<std::unique_ptr<Policy>> v;
  v.push_back(builtin_policies().create("sleb:layers=2"));
  v.push_back(std::move(rec));
  tf.set_policies(stack_of(std::move(v)));
  tf.forward(tokens, false);
  EXPECT_EQ(r.inputs[3], r.inputs[2]);
  EXPECT_NE(r.inputs[2], r.inputs[1]);
  EXPECT_TRUE(tf.cache().held(2, tf.n_past() - 1).empty());
  EXPECT_EQ(tf.cache().held(3, tf.n_past() - 1).size(), tokens.size());
}

TEST(PolicyRuntime, OrthoRankLogsItsDecisionsInPrefillAndDecode) {
  const auto tokens = random_tokens(23, 7);
  ThreadPool pool(2);
  Transformer tf(stories(), pool, 32);
  DecisionLog log;
  tf.set_decision_log(&log);
  tf.set_policies(make_policy_stack(std::vector<std::string>{"orthorank:layers=1,3,ratio=0.5"}, stories()));
  tf.forward(std::span(tokens).first(20), false);
  ASSERT_EQ(log.policies, (std::vector<std::string>{"orthorank:layers=1,3,ratio=0.5"}));
  ASSERT_EQ(log.batches.size(), 1u);
  ASSERT_EQ(log.layers.size(), 2u);
  for (const LayerRecord& r : log.layers) {
    EXPECT_EQ(r.flags[0], kKvCached) << "the sink only writes K/V";
    EXPECT_EQ(std::count(r.flags.begin(), r.flags.end(), kDenseToken), 10);
    EXPECT_EQ(std::count(r.flags.begin(), r.flags.end(), kKvCached), 10);
    EXPECT_EQ(r.scores.size(), 20u);
  }
  EXPECT_DOUBLE_EQ(log.ffn_fraction(), 1.0 - 20.0 / 100.0);
  for (size_t i = 20; i < tokens.size(); ++i) tf.forward(std::span(tokens).subspan(i, 1), false);
  EXPECT_EQ(log.batches.size(), 4u);
  EXPECT_EQ(log.layers.size(), 8u);
  EXPECT_TRUE(tf.cache().holds_all(1) && tf.cache().holds_all(3));  // unselected decode tokens write K/V
}

TEST(PolicyRuntime, RankingPoliciesSeeTheWholeCallAsOneBatch) {
  ThreadPool pool(2);
  Transformer tf(stories(), pool, 700);
  DecisionLog log;
  tf.set_decision_log(&log);
  tf.set_policies(make_policy_stack(std::vector<std::string>{"orthorank:layers=2"}, stories()));
  tf.forward(random_tokens(600, 8), false);
  ASSERT_EQ(log.batches.size(), 1u);
  EXPECT_EQ(log.batches[0].n_tok, 600u);
  EXPECT_EQ(std::count(log.layers[0].flags.begin(), log.layers[0].flags.end(), kDenseToken),
            199);  // int(0.333*600)
}

// forward_logits streams the same logits as forward(all_logits), in slices, whether the call runs
// in batches (dense) or as one batch (a ranking policy).
TEST(PolicyRuntime, StreamedLogitsEqualTheBufferedOnes) {
  const auto tokens = random_tokens(1100, 15);
  const size_t n_vocab = stories().config().n_vocab, first = 5;
  ThreadPool pool(2);
  for (const char* spec : {"", "orthorank:layers=2,ratio=0.5"}) {
    Transformer buffered(stories(), pool, 1100), streamed(stories(), pool, 1100);
    const std::vector<std::string> specs =
        *spec ? std::vector<std::string>{spec} : std::vector<std::string>{};
    buffered.set_policies(make_policy_stack(specs, stories()));
    streamed.set_policies(make_policy_stack(specs, stories()));
    const auto want = copy(buffered.forward(tokens, true));
    size_t next = first;
    streamed.forward_logits(tokens, first, [&](size_t row, std::span<const float> logits) {
      ASSERT_EQ(row, next);
      ASSERT_LE(logits.size(), 512 * n_vocab);
      for (size_t i = 0; i < logits.size(); ++i) ASSERT_EQ(logits[i], want[row * n_vocab + i]) << spec;
      next += logits.size() / n_vocab;
    });
    EXPECT_EQ(next, tokens.size());
  }
}

TEST(PolicyRuntime, CompositionRules) {
  const auto make = [](std::vector<std::string> specs) { return make_policy_stack(specs, stories()); };
  EXPECT_NO_THROW(make({"orthorank:layers=1,3", "sleb:layers=2"}));
  try {
    make({"orthorank:layers=1,3", "sleb:layers=3"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(
        e.what(),
        "policies orthorank:layers=1,3 and sleb:layers=3 both decide select_tokens at layer 3; give them "
        "disjoint layers");
  }
  EXPECT_THROW(make({"sleb:layers=5"}), Error);
  EXPECT_EQ(make({}), nullptr);
  // Observers share a layer with each other and with a decision.
  EXPECT_NO_THROW(
      stack(std::make_unique<InputRecorder>(), std::make_unique<InputRecorder>(),
            std::make_unique<FixedRows>(std::vector<uint32_t>{1}, std::vector<uint32_t>{0}, true)));
  ThreadPool pool(1);
  Transformer tf(stories(), pool, 8);
  tf.forward(random_tokens(2, 9), false);
  EXPECT_THROW(tf.set_policies(make({"sleb:layers=1"})), Error);
}

TEST(PolicyRuntime, SelectedKeysAndObservedAttention) {
  const auto tokens = random_tokens(40, 10);
  ThreadPool pool(2);
  Transformer dense(stories(), pool, 48), all_keys(stories(), pool, 48), recent(stories(), pool, 48);
  all_keys.set_policies(stack(std::make_unique<RecentKeys>(1000)));
  const auto want = copy(dense.forward(tokens, true));
  const auto got = copy(all_keys.forward(tokens, true));
  // Two attention implementations (flash chunks, per-key softmax) round differently by ~1e-5; where
  // that flips the F16 rounding of one cached K/V value, every later position sees it, and the logits
  // of this 5-layer model move by up to ~5e-3 (the optimization level decides where). Attending to the
  // wrong keys moves them by more than 0.1 (checked below with 3 recent keys).
  const float tolerance = 2e-2f;
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], tolerance);

  auto policy = std::make_unique<RecentKeys>(3);
  RecentKeys& r = *policy;
  DecisionLog log;
  log.key_lists = true;
  recent.set_decision_log(&log);
  recent.set_policies(stack(std::move(policy)));
  const auto few = copy(recent.forward(tokens, true));
  float max_change = 0.0f;
  for (size_t i = 0; i < want.size(); ++i) max_change = std::max(max_change, std::abs(few[i] - want[i]));
  EXPECT_GT(max_change, 5 * tolerance);
  recent.forward(random_tokens(1, 11), false);
  const size_t heads = stories().config().n_heads;
  EXPECT_EQ(r.rows_seen, (tokens.size() + 1) * heads);
  EXPECT_EQ(r.prepared_rows, (tokens.size() + 1) * stories().config().n_layers);
  ASSERT_EQ(log.layers.size(), 10u);  // 5 layers x 2 batches
  EXPECT_EQ(log.layers[0].keys_attended[0], 1u);
  EXPECT_EQ(log.layers[0].keys_attended[5 * heads], 3u);
  // The lists themselves: the 3 latest positions, in the prompt and in the decode step.
  ASSERT_EQ(log.layers[0].key_lists.size(), tokens.size() * heads);
  EXPECT_EQ(log.layers[0].key_lists[5 * heads + heads - 1], (std::vector<uint32_t>{3, 4, 5}));
  EXPECT_EQ(log.layers[0].key_lists[0], std::vector<uint32_t>{0});
  ASSERT_EQ(log.layers[9].key_lists.size(), heads);
  EXPECT_EQ(log.layers[9].key_lists[0], (std::vector<uint32_t>{38, 39, 40}));
}

// A decode step over 600 keys splits each head's keys across 2 threads; the probabilities an
// observer sees are then merged from the chunks' numerators: they must equal the 1-thread ones,
// which come from one pass over the whole list.
TEST(PolicyRuntime, ObservedProbabilitiesDoNotDependOnTheKeySplit) {
  const auto tokens = random_tokens(600, 12);
  std::vector<std::vector<float>> by_threads[2];
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    Transformer tf(stories(), pool, 640);
    auto recorder = std::make_unique<ProbabilityRecorder>();
    ProbabilityRecorder& r = *recorder;
    tf.set_policies(stack(std::move(recorder)));
    tf.forward(tokens, false);
    tf.forward(random_tokens(1, 13), false);
    by_threads[threads - 1] = r.probs;
  }
  const auto& one = by_threads[0];
  const auto& two = by_threads[1];
  ASSERT_EQ(one.size(), stories().config().n_heads);
  ASSERT_EQ(two.size(), one.size());
  for (size_t h = 0; h < one.size(); ++h) {
    ASSERT_EQ(one[h].size(), tokens.size() + 1);
    ASSERT_EQ(two[h].size(), one[h].size());
    float sum = 0;
    for (size_t j = 0; j < one[h].size(); ++j) {
      ASSERT_NEAR(two[h][j], one[h][j], 1e-6f + 1e-4f * one[h][j]) << h << " " << j;
      sum += two[h][j];
    }
    EXPECT_NEAR(sum, 1.0f, 1e-4f);
  }
}

TEST(PolicyRuntime, SkippedAttentionRunsTheFfnAndOptionallyCachesKv) {
  const auto tokens = random_tokens(8, 12);
  for (bool cache_kv : {true, false}) {
    ThreadPool pool(1);
    Transformer tf(stories(), pool, 16);
    DecisionLog log;
    tf.set_decision_log(&log);
    auto rec = std::make_unique<InputRecorder>();
    InputRecorder& r = *rec;
    tf.set_policies(stack(std::make_unique<SkipAllAttention>(2, cache_kv), std::move(rec)));
    tf.forward(tokens, false);
    ASSERT_EQ(log.layers.size(), 1u);
    const uint8_t want = kRanFfn | (cache_kv ? kKvCached : 0);
    for (uint8_t f : log.layers[0].flags) EXPECT_EQ(f, want);
    EXPECT_NE(r.inputs[3], r.inputs[2]);  // the FFN ran
    EXPECT_EQ(tf.cache().holds_all(2), cache_kv);
  }
}

TEST(PolicyRuntime, EvictionsAndStoragePins) {
  ThreadPool pool(2);
  Transformer tf(stories(), pool, 16);
  DecisionLog log;
  tf.set_decision_log(&log);
  tf.set_policies(stack(std::make_unique<EvictAndPin>()));
  tf.forward(random_tokens(6, 13), false);
  const auto held = tf.cache().held(0, tf.n_past() - 1);
  EXPECT_EQ(std::vector<uint32_t>(held.begin(), held.end()), (std::vector<uint32_t>{0, 3, 4, 5}));
  EXPECT_TRUE(tf.cache().holds_all(1));
  ASSERT_EQ(log.evictions.size(), 1u);
  EXPECT_EQ(log.evictions[0].positions, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(log.layers.size(), 5u);
  EXPECT_EQ(log.layers[0].flags[0], kDenseToken | kKvFullPrecision);
  EXPECT_EQ(log.layers[0].flags[1], kDenseToken);
  const std::span<const float> logits = tf.forward(random_tokens(1, 14), false);
  EXPECT_TRUE(std::all_of(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); }));
  EXPECT_EQ(tf.cache().held(0, tf.n_past() - 1).size(),
            5u);  // 0, 3, 4, 5 and the new token (1 and 2 evicted again)
}

}  // namespace
}  // namespace ts
