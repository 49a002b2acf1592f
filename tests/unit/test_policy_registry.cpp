// Every policy of the registry under the same checks, as kvpress runs its default presses: each
// entry has an example spec here (an entry added to the registry without one fails), alone and
// stacked with a KV-quantizing policy, on the real models' shapes (SmolLM2: llama, Q4_1;
// Qwen2.5-Coder-0.5B: qwen2, mixed K-quants; Gemma 3 270M: gemma3, head_dim 256 with one KV head,
// sliding-window layers) and the committed random-weight ones of the other architectures (qwen3,
// gemma3 and Mistral with windows of 8 shorter than the prompt, phi3; layers chosen by list
// instead of profiles). Each must give the same greedy tokens and
// log-probabilities at 1 and 2 threads and under a shuffled schedule, and a cache truncated back to a
// position and extended again must give what a sequence that never went past that position gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "butler_fixture.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "policies/builtin_policies.h"
#include "runtime/transformer.h"
#include "test_paths.h"

namespace ts {
namespace {

struct ModelCase {
  const char* file;            // in models/, else tests/fixtures/models/
  const char* profile_prefix;  // profiles/<prefix>-...json; "": specs name layers instead
  const char* test_name;
};

const ModelCase kModels[] = {{"SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2-135m", "SmolLM2"},
                             {"Qwen2.5-Coder-0.5B-Instruct.gguf", "qwen2.5-coder-0.5b", "Qwen05B"},
                             {"gemma-3-270m-Q4_K_M.gguf", "gemma3-270m", "Gemma3_270M"},
                             {"tiny-qwen3.gguf", "", "tiny_qwen3"},
                             {"tiny-gemma3-f16.gguf", "", "tiny_gemma3"},
                             {"tiny-mistral.gguf", "", "tiny_mistral"},
                             {"tiny-phi3.gguf", "", "tiny_phi3"}};

constexpr const char* kQuantizedKv = "kvquant:bits=4,group=32";
// Evicting step by step, they keep no history to rewind (a one-line error instead of a wrong cache).
const std::set<std::string> kRefusesTruncation = {"h2o", "snapkv"};

// One example spec per registry entry; entries marked kv need a quantized cache to act on.
struct Example {
  std::string spec;
  bool needs_quantized_kv = false;
};

std::map<std::string, Example> examples(const Model& model, const std::string& prefix) {
  const std::string profiles = source_path("profiles/") + prefix;
  const bool listed = prefix.empty();  // no calibrated profiles: the layers named
  return {
      {"orthorank",
       {listed ? "orthorank:layers=1" : "orthorank:profile=" + profiles + "-orthorank-shortened-20.json"}},
      {"sleb", {listed ? "sleb:layers=1" : "sleb:profile=" + profiles + "-sleb-20.json"}},
      {"shortened", {listed ? "shortened:layers=0" : "shortened:profile=" + profiles + "-shortened-20.json"}},
      {"tokenfilter", {"tokenfilter:ratio=0.3"}},
      {"attnremove", {"attnremove:ratio=0.3"}},
      {"oracle", {"oracle:keep=0.5"}},
      {"h2o", {"h2o:keep=0.5"}},
      {"snapkv", {"snapkv:keep=0.5,window=8"}},
      {"quest", {"quest:keep=0.5,page=8"}},
      {"tokenbutler", {"tokenbutler:keep=0.5,predictor=" + random_predictor(model, 5)}},
      {"streaming", {"streaming:window=24"}},
      {"zipvl", {"zipvl:tau=0.9"}},
      {"fixedratio", {listed ? "fixedratio:keep=0.7,after=1" : "fixedratio:keep=0.7"}},
      {"kvquant", {"kvquant:bits=2,group=32,mode=kivi,residual=8"}},
      {"pfn", {"pfn:n=4", true}},
      {"kvsink",
       {listed ? "kvsink:k=5,layer=0,channel=3" : "kvsink:k=5,profile=" + profiles + "-kvsink.json", true}},
  };
}

struct Greedy {
  std::vector<int32_t> tokens;
  std::vector<float> log_probs;
};

float log_prob(std::span<const float> logits, int32_t id) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (const float x : logits) sum += std::exp(double(x) - mx);
  return static_cast<float>(logits[static_cast<size_t>(id)] - mx - std::log(sum));
}

Greedy greedy(const Model& model, const std::vector<std::string>& specs, int threads,
              const std::vector<int32_t>& prompt, int n, uint64_t shuffle_seed = 0) {
  ThreadPool pool(threads, {shuffle_seed});
  Transformer tf(model, pool, 256);
  tf.set_policies(make_policy_stack(specs, model));
  Greedy g;
  std::span<const float> logits = tf.forward(prompt, false);
  for (int i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    g.tokens.push_back(id);
    g.log_probs.push_back(log_prob(logits, id));
    logits = tf.forward(std::span(&g.tokens.back(), 1), false);
  }
  return g;
}

// The logits of `tail` after `head`, when the cache (a) never held more than head, or (b) held
// head + detour and was truncated back to head.
std::vector<float> tail_logits(const Model& model, const std::vector<std::string>& specs,
                               const std::vector<int32_t>& head, const std::vector<int32_t>& detour,
                               const std::vector<int32_t>& tail) {
  ThreadPool pool(2);
  Transformer tf(model, pool, 256);
  tf.set_policies(make_policy_stack(specs, model));
  tf.forward(head, false);
  if (!detour.empty()) {
    tf.forward(detour, false);
    tf.truncate(head.size());
  }
  const std::span<const float> logits = tf.forward(tail, true);
  return {logits.begin(), logits.end()};
}

class PolicyRegistryWalk : public testing::TestWithParam<ModelCase> {};

std::string model_path(const char* file) {
  const std::string fetched = source_path(std::string("models/") + file);
  return std::filesystem::exists(fetched) ? fetched
                                          : source_path(std::string("tests/fixtures/models/") + file);
}

TEST_P(PolicyRegistryWalk, EveryPolicyIsThreadCountInvariantAndTruncatesExactly) {
  const std::string path = model_path(GetParam().file);
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << GetParam().file << " not present (tools/fetch_model.sh)";
  const auto model = Model::load(path);
  const std::map<std::string, Example> ex = examples(*model, GetParam().profile_prefix);
  const std::vector<int32_t> prompt = model->tokenizer().encode(
      "The tower is 324 metres tall, about the same height as an 81-storey building, and the tallest "
      "structure in Paris. Its base is square, measuring 125 metres on each side. During its construction, "
      "the Eiffel Tower surpassed the Washington Monument",
      model->tokenizer().add_bos_default(), false);
  ASSERT_GT(prompt.size(), 40u);
  const std::vector<int32_t> head(prompt.begin(), prompt.end() - 12), tail(prompt.end() - 12, prompt.end());
  const std::vector<int32_t> detour(prompt.begin() + 3, prompt.begin() + 20);

  for (const PolicyEntry& e : builtin_policies().entries()) {
    ASSERT_TRUE(ex.count(e.name)) << "policy " << e.name << " has no example spec in this test: add one";
    const Example& example = ex.at(e.name);
    std::vector<std::vector<std::string>> stacks;
    if (!example.needs_quantized_kv) stacks.push_back({example.spec});
    if (e.name != "kvquant") stacks.push_back({kQuantizedKv, example.spec});
    for (const std::vector<std::string>& specs : stacks) {
      const std::string what =
          std::string(GetParam().file) + ": " + specs.back() + (specs.size() > 1 ? " on INT4 KV" : "");
      const Greedy one = greedy(*model, specs, 1, prompt, 6), two = greedy(*model, specs, 2, prompt, 6);
      EXPECT_EQ(one.tokens, two.tokens) << what;
      EXPECT_EQ(one.log_probs, two.log_probs) << what << ": log-probabilities differ between 1 and 2 threads";
      const Greedy shuffled = greedy(*model, specs, 2, prompt, 6, 0x5eed);
      EXPECT_EQ(one.tokens, shuffled.tokens) << what << " under a shuffled schedule";
      EXPECT_EQ(one.log_probs, shuffled.log_probs)
          << what << ": log-probabilities differ under a shuffled schedule";
      const std::vector<float> fresh = tail_logits(*model, specs, head, {}, tail);
      try {
        const std::vector<float> truncated = tail_logits(*model, specs, head, detour, tail);
        EXPECT_TRUE(fresh == truncated) << what << ": truncated and extended differs from a fresh run";
      } catch (const Error& err) {
        // Evicting step by step (H2O, SnapKV) keeps no history to rewind: they refuse, in one line.
        EXPECT_TRUE(kRefusesTruncation.count(e.name)) << what << ": " << err.what();
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, PolicyRegistryWalk, testing::ValuesIn(kModels),
                         [](const testing::TestParamInfo<ModelCase>& info) { return info.param.test_name; });

}  // namespace
}  // namespace ts

namespace ts {
namespace {

// The model's sliding window narrows the keys whichever attention path runs: a key-selecting policy
// keeping every key (attention over key lists) gives dense attention's logits (contiguous streams),
// on models whose windows of 8 are far shorter than the prompt. Ignoring the window in either path
// moves these logits by 20 or more (tools/make_tiny_models.py's sensitivity entries).
TEST(SlidingWindow, KeyListsKeepingEveryKeyGiveDenseLogits) {
  for (const char* file : {"tiny-gemma3.gguf", "tiny-mistral.gguf"}) {
    const auto model = Model::load(model_path(file));
    ASSERT_GT(model->config().layers[0].window, 0u) << file;
    const std::vector<int32_t> prompt = model->tokenizer().encode(
        "A window of eight tokens is far shorter than this prompt, so most keys fall outside it.", false,
        false);
    ThreadPool pool(2);
    const auto logits = [&](std::vector<std::string> specs) {
      Transformer tf(*model, pool, 128);
      tf.set_policies(make_policy_stack(specs, *model));
      const std::span<const float> out = tf.forward(prompt, true);
      return std::vector<float>(out.begin(), out.end());
    };
    const std::vector<float> dense = logits({});
    for (const char* spec : {"oracle:keep=1,first_layer=0", "quest:keep=1,page=8"}) {
      const std::vector<float> listed = logits({spec});
      ASSERT_EQ(listed.size(), dense.size());
      float worst = 0;
      for (size_t i = 0; i < dense.size(); ++i) worst = std::max(worst, std::fabs(listed[i] - dense[i]));
      EXPECT_LT(worst, 1e-3f) << file << ", " << spec;
    }
  }
}

}  // namespace
}  // namespace ts
