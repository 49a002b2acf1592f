// Token Filtering (paper 003): the similarity and fusion math on hand-made vectors, the Eq. 4
// controller on synthetic score streams, the policy's decisions on synthetic K/V (anchors, first
// token, per-call decisions, prefix reuse), option checks, and on stories260K: ratio 0 is the dense
// engine bit for bit, the achieved skip ratio, and the static attention-removal baseline.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "policies/builtin_policies.h"
#include "policies/token_filter/attention_removal.h"
#include "policies/token_filter/kv_similarity.h"
#include "policies/token_filter/skip_controller.h"
#include "policies/token_filter/token_filter.h"
#include "runtime/transformer.h"
#include "test_paths.h"

namespace ts {
namespace {

const Model& stories() {
  static const auto model = Model::load(shared_path("models/stories260K.gguf"));
  return *model;
}

TEST(TokenFilterMath, HeadSimilarityIsTheMeanAndVarianceOfPerHeadCosines) {
  // Head 0 points along its anchor (cos 1), head 1 is orthogonal to it (cos 0), head 2 opposite
  // (cos -1); scaling a vector does not change its cosine.
  const std::vector<float> x = {2, 0, 0, 3, -1, -1};
  const std::vector<float> anchor = {5, 0, 1, 0, 1, 1};
  const HeadSimilarity s = head_similarity(x, anchor, 3, 2);
  EXPECT_NEAR(s.mean, 0.0f, 1e-6f);
  EXPECT_NEAR(s.var, 2.0f / 3.0f, 1e-6f);  // population variance of {1, 0, -1}
  const HeadSimilarity two = head_similarity(std::span(x).first(4), std::span(anchor).first(4), 2, 2);
  EXPECT_NEAR(two.mean, 0.5f, 1e-6f);
  EXPECT_NEAR(two.var, 0.25f, 1e-6f);
  // A zero anchor head counts as cosine 0, not NaN.
  const std::vector<float> zero = {0, 0, 1, 0};
  const HeadSimilarity z = head_similarity(std::span(x).first(4), zero, 2, 2);
  EXPECT_NEAR(z.mean, 0.0f, 1e-6f);
  EXPECT_NEAR(z.var, 0.0f, 1e-6f);
}

TEST(TokenFilterMath, FusionWeightsPrintedIntentAndSingleSides) {
  // Printed Eq. 1: alpha = var_v^-1 / (var_k^-1 + var_v^-1) = var_k / (var_k + var_v).
  EXPECT_NEAR(key_weight(Fusion::Printed, 0.04f, 0.01f), 0.8f, 1e-6f);
  EXPECT_NEAR(key_weight(Fusion::Intent, 0.04f, 0.01f), 0.2f, 1e-6f);  // the steadier key weighs less
  EXPECT_FLOAT_EQ(key_weight(Fusion::Mean, 0.04f, 0.01f), 0.5f);
  EXPECT_FLOAT_EQ(key_weight(Fusion::KeyOnly, 0.04f, 0.01f), 1.0f);
  EXPECT_FLOAT_EQ(key_weight(Fusion::ValueOnly, 0.04f, 0.01f), 0.0f);
  EXPECT_NEAR(key_weight(Fusion::Printed, 0, 0), 0.5f, 1e-6f);    // no variance on either side
  EXPECT_NEAR(key_weight(Fusion::Intent, 0, 0.5f), 1.0f, 1e-6f);  // only the key is steady
  // S = alpha * s_k + (1 - alpha) * s_v.
  EXPECT_NEAR(fused_score(Fusion::Printed, {0.9f, 0.04f}, {0.4f, 0.01f}), 0.8f * 0.9f + 0.2f * 0.4f, 1e-6f);
  EXPECT_NEAR(fused_score(Fusion::Intent, {0.9f, 0.04f}, {0.4f, 0.01f}), 0.2f * 0.9f + 0.8f * 0.4f, 1e-6f);
}

// Runs the controller over `n` scores from `next`; returns the skip rate achieved over the stream
// (S "so far", what Eq. 4 steers).
template <typename Next>
double run_controller(const ControllerParams& p, size_t n, Next next, double* threshold_out = nullptr) {
  double threshold = p.initial_threshold;
  SkipCount seen;
  for (size_t i = 0; i < n; ++i) seen.add(controlled_skip(p, threshold, seen, next(i)));
  if (threshold_out) *threshold_out = threshold;
  return seen.rate();
}

TEST(TokenFilterController, Eq4ConvergesToTheTargetOnASyntheticStream) {
  // Scores far above the initial threshold 0.5: at first every token skips. The cumulative rate
  // S closes on the target; the threshold keeps swinging about the (1 - P)-quantile because S
  // reacts ever more slowly (no damping), so only the rate is checked.
  for (double target : {0.2, 0.4, 0.66}) {
    std::mt19937 rng(7);
    std::normal_distribution<float> scores(0.8f, 0.1f);
    const ControllerParams p{target, 0.01, 0.5, false};
    const double early = run_controller(p, 200, [&](size_t) { return scores(rng); });
    const double rate = run_controller(p, 20000, [&](size_t) { return scores(rng); });
    EXPECT_NEAR(rate, target, 0.015) << target;
    EXPECT_LT(std::fabs(rate - target), std::fabs(early - target) + 0.005) << target;
  }
}

TEST(TokenFilterController, FollowsADriftingStream) {
  // Scores drift upwards by 0.3 over the stream: a fixed threshold would end skipping almost all.
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> noise(0.0f, 0.2f);
  const ControllerParams p{0.3, 0.01, 0.5, false};
  const double rate =
      run_controller(p, 20000, [&](size_t i) { return 0.4f + 0.3f * float(i) / 20000 + noise(rng); });
  EXPECT_NEAR(rate, 0.3, 0.015);
}

TEST(TokenFilterController, PrintedAlgorithm1SignRunsAway) {
  std::mt19937 rng(9);
  std::normal_distribution<float> scores(0.5f, 0.1f);
  const ControllerParams p{0.4, 0.01, 0.5, true};
  const double rate = run_controller(p, 20000, [&](size_t) { return scores(rng); });
  EXPECT_TRUE(rate < 0.05 || rate > 0.95) << rate;
}

TEST(TokenFilterController, TargetsZeroAndOneAreNeverAndAlways) {
  double threshold = 0.5;
  SkipCount seen{10, 0};
  EXPECT_FALSE(controlled_skip({0.0, 0.01, 0.5, false}, threshold, seen, 100.0f));
  EXPECT_TRUE(controlled_skip({1.0, 0.01, 0.5, false}, threshold, seen, -100.0f));
  // Eq. 4 moves before the decision: the rate 0 is below the target 0.5, so T drops by 0.1 * 0.5.
  EXPECT_TRUE(controlled_skip({0.5, 0.1, 0.5, false}, threshold, seen, 0.46f));
  EXPECT_NEAR(threshold, 0.45, 1e-12);
}

// Synthetic K/V for a bound policy: kv_dim-wide rows, one per token.
struct KvStream {
  size_t kv_dim;
  std::vector<float> keys, values;
  void add(const std::vector<float>& k, const std::vector<float>& v) {
    keys.insert(keys.end(), k.begin(), k.end());
    values.insert(values.end(), v.begin(), v.end());
  }
};

std::unique_ptr<TokenFilter> bound_filter(const std::string& spec) {
  auto p = builtin_policies().create(spec);
  auto* filter = dynamic_cast<TokenFilter*>(p.get());
  EXPECT_NE(filter, nullptr);
  p.release();
  std::unique_ptr<TokenFilter> f(filter);
  f->bind(stories());
  return f;
}

// Calls skip_attention on `layer` for rows first..first+n of the stream at positions pos0...
std::vector<uint8_t> skips(TokenFilter& f, uint32_t layer, const KvStream& s, size_t first, size_t n,
                           size_t pos0, bool* cache_kv = nullptr) {
  RowSet rows;
  rows.set_all(n);
  const KvRows kv{layer,
                  pos0,
                  &rows,
                  s.kv_dim,
                  stories().config().head_dim,
                  &s.keys[first * s.kv_dim],
                  &s.values[first * s.kv_dim]};
  const LayerInput in{layer, pos0, n, 0, nullptr, nullptr};
  AttentionSkips out;
  out.skip.assign(n, 0);
  f.skip_attention(in, kv, rows, out);
  if (cache_kv) *cache_kv = out.cache_skipped_kv;
  return out.skip;
}

KvStream random_stream(size_t n, uint32_t seed) {
  const size_t kv_dim = size_t{stories().config().n_kv_heads} * stories().config().head_dim;
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  KvStream s{kv_dim, {}, {}};
  std::vector<float> k(kv_dim), v(kv_dim), bias(kv_dim);
  for (float& x : bias) x = g(rng);  // a shared direction, so that similarities vary around it
  for (size_t t = 0; t < n; ++t) {
    for (size_t i = 0; i < kv_dim; ++i) {
      k[i] = bias[i] + g(rng);
      v[i] = -bias[i] + g(rng);
    }
    s.add(k, v);
  }
  return s;
}

TEST(TokenFilterPolicy, TailLayersTargetsAndFirstToken) {
  const size_t n_layers = stories().config().n_layers;  // 5
  auto f = bound_filter("tokenfilter:ratio=0.2,tail=0.4");
  EXPECT_EQ(f->layers(), (std::vector<uint32_t>{3, 4}));
  EXPECT_NEAR(f->layer_target(), 0.2 * double(n_layers) / 2, 1e-12);
  EXPECT_EQ(bound_filter("tokenfilter:ratio=0.2,tail=0.4,placement=head")->layers(),
            (std::vector<uint32_t>{0, 1}));
  auto uniform = bound_filter("tokenfilter:ratio=0.2,placement=uniform");
  EXPECT_EQ(uniform->layers().size(), n_layers);
  EXPECT_NEAR(uniform->layer_target(), 0.2, 1e-12);
  // Target 1: every token but the sequence's first skips, and by default its K/V are not cached.
  auto all = bound_filter("tokenfilter:ratio=0.4,tail=0.4");
  const KvStream s = random_stream(6, 1);
  bool cache_kv = true;
  EXPECT_EQ(skips(*all, 4, s, 0, 6, 0, &cache_kv), (std::vector<uint8_t>{0, 1, 1, 1, 1, 1}));
  EXPECT_FALSE(cache_kv);
  auto cached = bound_filter("tokenfilter:ratio=0.4,tail=0.4,kv=cache");
  skips(*cached, 4, s, 0, 6, 0, &cache_kv);
  EXPECT_TRUE(cache_kv);
}

TEST(TokenFilterPolicy, SimilarTokensSkipAndAnchorsFollowTheStream) {
  // Keys and values repeat one vector, then turn to its opposite: with the anchor an EMA of the
  // previous tokens, the repeats score 1 (skip at any threshold below 1) and the turn scores -1.
  auto f = bound_filter("tokenfilter:ratio=0.2,tail=0.4,lr=0");  // lr 0: the threshold stays 0.5
  const size_t kv_dim = size_t{stories().config().n_kv_heads} * stories().config().head_dim;
  KvStream s{kv_dim, {}, {}};
  std::vector<float> a(kv_dim, 1.0f), b(kv_dim, -1.0f);
  for (int i = 0; i < 4; ++i) s.add(a, a);
  s.add(b, b);
  EXPECT_EQ(skips(*f, 3, s, 0, 5, 0), (std::vector<uint8_t>{0, 1, 1, 1, 0}));
  EXPECT_EQ(f->skips(3).decided, 4u);
  EXPECT_EQ(f->skips(3).skipped, 3u);
  // Key-only and value-only read only their side: a token whose value turned but key did not.
  KvStream mixed{kv_dim, {}, {}};
  mixed.add(a, a);
  mixed.add(a, b);
  EXPECT_EQ(skips(*bound_filter("tokenfilter:ratio=0.2,tail=0.4,lr=0,select=k"), 3, mixed, 0, 2, 0),
            (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(skips(*bound_filter("tokenfilter:ratio=0.2,tail=0.4,lr=0,select=v"), 3, mixed, 0, 2, 0),
            (std::vector<uint8_t>{0, 0}));
}

TEST(TokenFilterPolicy, PrefixReuseContinuesAsIfTheSuffixNeverRan) {
  const KvStream s = random_stream(60, 2), other = random_stream(60, 3);
  for (const char* spec :
       {"tokenfilter:ratio=0.3,tail=0.8", "tokenfilter:ratio=0.3,tail=0.8,anchor=mean,variance=running",
        "tokenfilter:ratio=0.3,tail=0.8,select=random,seed=4"}) {
    auto fresh = bound_filter(spec), reused = bound_filter(spec);
    const std::vector<uint8_t> want = skips(*fresh, 2, s, 0, 60, 0);
    std::vector<uint8_t> got = skips(*reused, 2, s, 0, 30, 0);
    skips(*reused, 2, other, 30, 25, 30);  // another continuation, then back to position 30
    reused->truncate(30);
    const std::vector<uint8_t> rest = skips(*reused, 2, s, 30, 30, 30);
    got.insert(got.end(), rest.begin(), rest.end());
    EXPECT_EQ(got, want) << spec;
    EXPECT_EQ(reused->threshold(2), fresh->threshold(2)) << spec;
    EXPECT_EQ(reused->skips(2).skipped, fresh->skips(2).skipped) << spec;
    reused->truncate(0);  // a new sequence starts from scratch (state=sequence)
    EXPECT_EQ(reused->skips(2).decided, 0u) << spec;
  }
}

// The anchors of old positions are kept only at checkpoints (every 256th step): a rewind past the
// recent ones goes back to the checkpoint before it, and the tokens from there on run again.
TEST(TokenFilterPolicy, RewindsPastTheRecentAnchorsFromACheckpoint) {
  const KvStream s = random_stream(1000, 5), other = random_stream(1000, 6);
  for (const char* spec : {"tokenfilter:ratio=0.3,tail=0.8", "tokenfilter:ratio=0.3,tail=0.8,anchor=mean"}) {
    auto fresh = bound_filter(spec), reused = bound_filter(spec);
    const std::vector<uint8_t> want = skips(*fresh, 2, s, 0, 1000, 0);
    std::vector<uint8_t> got = skips(*reused, 2, s, 0, 256, 0);
    skips(*reused, 2, other, 256, 644, 256);             // another continuation to position 900
    EXPECT_EQ(reused->rewind_point(700), 700u) << spec;  // recent: exact anywhere
    EXPECT_EQ(reused->rewind_point(300), 256u) << spec;  // older: the checkpoint before
    EXPECT_EQ(reused->rewind_point(256), 256u) << spec;
    EXPECT_THROW(reused->truncate(300), Error) << spec;  // refused, state untouched
    reused->truncate(256);
    const std::vector<uint8_t> rest = skips(*reused, 2, s, 256, 744, 256);
    got.insert(got.end(), rest.begin(), rest.end());
    EXPECT_EQ(got, want) << spec;
    EXPECT_EQ(reused->threshold(2), fresh->threshold(2)) << spec;
    // Back into the recent anchors of this history: exact again, with no checkpoint involved.
    const std::vector<uint8_t> tail_want(want.end() - 100, want.end());
    ASSERT_EQ(reused->rewind_point(900), 900u) << spec;
    reused->truncate(900);
    EXPECT_EQ(skips(*reused, 2, s, 900, 100, 900), tail_want) << spec;
  }
}

TEST(TokenFilterPolicy, StateRunCarriesTheControllerAcrossSequences) {
  const KvStream s = random_stream(40, 5);
  auto f = bound_filter("tokenfilter:ratio=0.3,tail=0.8,state=run");
  skips(*f, 2, s, 0, 40, 0);
  const SkipCount before = f->skips(2);
  f->truncate(0);
  EXPECT_EQ(f->skips(2).decided, before.decided);
  skips(*f, 2, s, 0, 40, 0);
  EXPECT_EQ(f->skips(2).decided, 2 * before.decided);
}

TEST(TokenFilterPolicy, PerCallDecisionAppliesTheLastTokensChoiceToTheCall) {
  const size_t kv_dim = size_t{stories().config().n_kv_heads} * stories().config().head_dim;
  KvStream s{kv_dim, {}, {}};
  std::vector<float> a(kv_dim, 1.0f), b(kv_dim, -1.0f);
  for (int i = 0; i < 3; ++i) s.add(a, a);
  s.add(b, b);  // the last token turns away from its anchor (score -1); the repeats score 1
  auto f = bound_filter("tokenfilter:ratio=0.2,tail=0.4,lr=0,decide=call,threshold=-1.5");
  EXPECT_TRUE(f->ranks_whole_calls());
  EXPECT_EQ(skips(*f, 3, s, 0, 4, 0), (std::vector<uint8_t>{0, 1, 1, 1}));  // the first token never skips
  EXPECT_EQ(f->skips(3).decided, 1u);
  // At threshold 0 the repeats would skip one by one, but the call follows its last token.
  auto g = bound_filter("tokenfilter:ratio=0.2,tail=0.4,lr=0,decide=call,threshold=0");
  EXPECT_EQ(skips(*g, 3, s, 0, 4, 0), (std::vector<uint8_t>{0, 0, 0, 0}));
}

TEST(TokenFilterPolicy, BadOptionsAreOneLineErrors) {
  EXPECT_THROW(bound_filter("tokenfilter:ratio=0.6,tail=0.4"), Error);  // P_tail 1.5
  EXPECT_THROW(builtin_policies().create("tokenfilter:select=k,fusion=intent"), Error);
  EXPECT_THROW(builtin_policies().create("tokenfilter:placement=uniform,tail=0.5"), Error);
  EXPECT_THROW(builtin_policies().create("tokenfilter:tail=0"), Error);
  EXPECT_THROW(builtin_policies().create("tokenfilter:fusion=inverse"), Error);
  EXPECT_THROW(builtin_policies().create("tokenfilter:ratio=1.5"), Error);
  EXPECT_THROW(builtin_policies().create("attnremove"), Error);
}

std::vector<float> copy(std::span<const float> s) { return {s.begin(), s.end()}; }

std::vector<int32_t> random_tokens(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(3 + rng() % 500);
  return t;
}

TEST(TokenFilterRuntime, RatioZeroEqualsDenseBitForBitInPrefillAndDecode) {
  const auto tokens = random_tokens(60, 1);
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    Transformer dense(stories(), pool, 64), filtered(stories(), pool, 64);
    // Every layer runs the filter (separate Q projection, scores, controller) and skips nothing.
    filtered.set_policies(
        make_policy_stack(std::vector<std::string>{"tokenfilter:ratio=0,placement=uniform"}, stories()));
    const auto prompt = std::span(tokens).first(50);
    EXPECT_EQ(copy(dense.forward(prompt, true)), copy(filtered.forward(prompt, true))) << threads;
    for (size_t i = 50; i < tokens.size(); ++i) {
      const auto step = std::span(tokens).subspan(i, 1);
      ASSERT_EQ(copy(dense.forward(step, false)), copy(filtered.forward(step, false))) << "position " << i;
    }
    EXPECT_EQ(filtered.policies()->counts().attention, filtered.policies()->counts().token_layers);
  }
}

TEST(TokenFilterRuntime, AchievedSkipRatioFollowsTheTargetInPrefillAndDecode) {
  const auto tokens = random_tokens(400, 3);
  ThreadPool pool(2);
  Transformer tf(stories(), pool, 400);
  // 2 of 5 layers at P = 0.5: a quarter of the (token, layer) pairs skip attention.
  tf.set_policies(
      make_policy_stack(std::vector<std::string>{"tokenfilter:ratio=0.2,tail=0.4,lr=0.05"}, stories()));
  tf.forward(std::span(tokens).first(300), false);
  for (size_t i = 300; i < tokens.size(); ++i) tf.forward(std::span(tokens).subspan(i, 1), false);
  const StepCounts& c = tf.policies()->counts();
  EXPECT_EQ(c.token_layers, 400u * 5);
  EXPECT_NEAR(1 - c.fraction(c.attention), 0.2, 0.03);
  EXPECT_EQ(c.kv_cached, c.attention);  // skipped tokens' K/V dropped
  EXPECT_EQ(c.ffn, c.token_layers);
  EXPECT_FALSE(tf.cache().holds_all(4));
  EXPECT_TRUE(tf.cache().holds_all(2));
}

TEST(TokenFilterRuntime, AttentionRemovalSkipsEveryTokenInItsLayers) {
  const auto tokens = random_tokens(20, 4);
  ThreadPool pool(1);
  Transformer tf(stories(), pool, 32);
  tf.set_policies(make_policy_stack(std::vector<std::string>{"attnremove:ratio=0.4"}, stories()));
  const auto* removal = dynamic_cast<const AttentionRemoval*>(tf.policies()->policies()[0].get());
  ASSERT_NE(removal, nullptr);
  EXPECT_EQ(removal->layers(), (std::vector<uint32_t>{3, 4}));
  tf.forward(tokens, false);
  const StepCounts& c = tf.policies()->counts();
  EXPECT_EQ(c.token_layers - c.attention, 20u * 2);
  EXPECT_EQ(c.kv_cached, c.attention);
}

}  // namespace
}  // namespace ts
