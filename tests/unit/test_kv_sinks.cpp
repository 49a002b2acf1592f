// Sink preservation under a quantized cache: Preserve-First-N and KVSink keep their tokens' K/V
// bit-exact, only after the emergence layer for KVSink; and the outlier analysis on SmolLM2 finds its stable
// outlier channel and the sink at 0.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/thread_pool.h"
#include "model/model.h"
#include "policies/builtin_policies.h"
#include "policies/kvquant/outlier_profile.h"
#include "policies/kvquant/sink_preservation.h"
#include "runtime/transformer.h"
#include "test_paths.h"

namespace ts {
namespace {

const Model& stories() {
  static const auto model = Model::load(shared_path("models/stories260K.gguf"));
  return *model;
}

std::vector<int32_t> tokens(size_t n) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>(3 + (i * 53) % 450);
  return t;
}

// Prefill at full precision computes the same K/V whatever is preserved; after one decode step
// the first N read back bit-exact (as in a run keeping every token), the rest as 2-bit codes.
TEST(KvSinks, PreservedTokensAreBitExactAndOnlyThose) {
  ThreadPool pool(2);
  const auto t = tokens(40);
  const auto run = [&](const char* pfn) {
    auto tf = std::make_unique<Transformer>(stories(), pool, 64);
    tf->set_policies(make_policy_stack(std::vector<std::string>{"kvquant:bits=2,group=8", pfn}, stories()));
    tf->forward(t, false);
    tf->forward(std::vector<int32_t>{7}, false);
    return tf;
  };
  const auto all = run("pfn:n=64"), first3 = run("pfn:n=3");
  const KvCache& c = first3->cache();
  const size_t kv = c.kv_dim();
  std::vector<float> got(kv), want(kv);
  for (size_t l = 0; l < stories().config().n_layers; ++l)
    for (size_t p = 0; p < t.size(); ++p) {
      ASSERT_EQ(c.full_precision(l, p), p < 3);
      c.read_key(l, p, got.data());
      all->cache().read_key(l, p, want.data());
      if (p < 3) {
        ASSERT_EQ(got, want) << l << " " << p;
        c.read_value(l, p, got.data());
        all->cache().read_value(l, p, want.data());
        ASSERT_EQ(got, want);
      } else {
        ASSERT_NE(got, want);  // 2-bit codes
      }
    }
}

// 30 tokens, and 1300: a prompt longer than one internal batch (512) still ends with exactly k
// pinned tokens, the top k of the whole prompt.
class KvSinkPrompt : public testing::TestWithParam<size_t> {};
INSTANTIATE_TEST_SUITE_P(KvSinks, KvSinkPrompt, testing::Values(30, 1300));

TEST_P(KvSinkPrompt, KeepsTheTopKAfterTheEmergenceLayer) {
  ThreadPool pool(2);
  const auto t = tokens(GetParam());
  Transformer tf(stories(), pool, GetParam() + 8);
  PolicyOptions opts(PolicySpec::parse("kvsink:k=3,layer=1,channel=7"), KvSink::options());
  auto owned = std::make_unique<KvSink>(opts);
  KvSink* sink = owned.get();
  std::vector<std::unique_ptr<Policy>> ps;
  ps.push_back(builtin_policies().create("kvquant:bits=4,group=8"));
  ps.push_back(std::move(owned));
  tf.set_policies(std::make_unique<PolicyStack>(std::move(ps), stories()));
  tf.forward(t, false);
  const std::vector<uint32_t> s = sink->sinks();
  ASSERT_EQ(s.size(), 3u);
  for (size_t l = 0; l < stories().config().n_layers; ++l)
    for (size_t p = 0; p < t.size(); ++p)
      EXPECT_EQ(tf.cache().full_precision(l, p), l > 1 && std::find(s.begin(), s.end(), p) != s.end());
  tf.forward(std::vector<int32_t>{5}, false);  // decode adds no sink
  EXPECT_EQ(sink->sinks(), s);
  tf.truncate(0);
  EXPECT_TRUE(sink->sinks().empty());
}

TEST(KvSinks, SmolLM2OutlierChannelAndSinkAtZero) {
  const std::string path = source_path("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no SmolLM2 at " << path;
  const auto model = Model::load(path);
  ThreadPool pool(2);
  const std::vector<std::vector<int32_t>> texts = {model->tokenizer().encode(
      "The following are multiple choice questions (with answers) about machine learning.", false, false)};
  const OutlierProfile p = choose_sink_channel(*model, measure_outliers(*model, pool, texts, 3));
  // Measured (tokensieve analyze outliers): channel 507 carries |h| ~ 2.3e4 at position 0 from the
  // output of block 11 on (median |h| ~ 2), channel 247 ~ 1.7e3 next to it.
  EXPECT_EQ(p.channel, 507u);
  EXPECT_EQ(p.emergence_layer, 11u);
  EXPECT_NE(std::find(p.channels.begin(), p.channels.end(), 247u), p.channels.end());
  const BlockOutliers& b = p.layers[15];
  EXPECT_EQ(b.top[0].channel, 507u);
  EXPECT_EQ(b.top[0].position, 0u);
  EXPECT_GT(b.top[0].max_abs, 1000 * b.median_abs);
}

}  // namespace
}  // namespace ts
