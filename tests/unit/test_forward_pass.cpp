// ForwardPass over several sequences at once (continuous batching): each sequence's logits and
// decisions are bit for bit those of running it alone, whatever else shares its steps, for dense
// sequences and for every policy family, with prompts and decode tokens mixed in one step.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "butler_fixture.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "policies/builtin_policies.h"
#include "runtime/forward_pass.h"
#include "runtime/transformer.h"
#include "stories_fixture.h"
#include "test_paths.h"

namespace ts {
namespace {

// One sequence of a test: its policies, its tokens and how they are cut into calls (a prompt,
// then decode tokens), and the step of the batch schedule it joins at.
struct Script {
  std::vector<std::string> specs;
  std::vector<int32_t> tokens;
  std::vector<size_t> calls;
  size_t joins_at = 0;
};

struct Outcome {
  std::vector<float> logits;  // every row of every call
  DecisionLog log;
};

std::vector<Script> scripts_with_calls(const std::vector<std::vector<std::string>>& specs) {
  std::vector<Script> scripts;
  for (size_t i = 0; i < specs.size(); ++i) {
    Script s;
    s.specs = specs[i];
    const size_t prompt = 9 + 7 * i % 40, decode = 6;
    s.calls.push_back(prompt);
    if (i % 3 == 1) {  // a prompt in two chunks
      s.calls = {prompt / 2, prompt - prompt / 2};
    }
    for (size_t k = 0; k < decode; ++k) s.calls.push_back(1);
    s.tokens = random_tokens(prompt + decode, 100 + static_cast<uint32_t>(i));
    s.joins_at = i % 4;
    scripts.push_back(std::move(s));
  }
  return scripts;
}

Outcome run_alone(const Model& model, const Script& script, ThreadPool& pool) {
  Transformer tf(model, pool, 128);
  Outcome out;
  out.log.key_lists = true;  // compared too: each (row, head) list at its batch row
  tf.set_decision_log(&out.log);
  if (!script.specs.empty()) tf.set_policies(make_policy_stack(script.specs, model));
  size_t at = 0;
  for (size_t n : script.calls) {
    const auto logits = tf.forward(std::span(script.tokens).subspan(at, n), true);
    out.logits.insert(out.logits.end(), logits.begin(), logits.end());
    at += n;
  }
  return out;
}

// Every script in one batch schedule: at each step each joined sequence with calls left runs its
// next call, all of them in one ForwardPass::run.
std::vector<Outcome> run_batched(const Model& model, const std::vector<Script>& scripts, ThreadPool& pool) {
  ForwardPass pass(model, pool);
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<Outcome> out(scripts.size());
  std::vector<size_t> next_call(scripts.size(), 0), at(scripts.size(), 0);
  for (size_t i = 0; i < scripts.size(); ++i) {
    seqs.push_back(std::make_unique<Sequence>(model.config(), 128));
    out[i].log.key_lists = true;
    seqs[i]->set_decision_log(&out[i].log);
    if (!scripts[i].specs.empty()) seqs[i]->set_policies(make_policy_stack(scripts[i].specs, model));
  }
  for (size_t step = 0;; ++step) {
    std::vector<SequenceStep> steps;
    std::vector<size_t> who;
    for (size_t i = 0; i < scripts.size(); ++i) {
      if (step < scripts[i].joins_at || next_call[i] == scripts[i].calls.size()) continue;
      const size_t n = scripts[i].calls[next_call[i]];
      steps.push_back({seqs[i].get(), std::span(scripts[i].tokens).subspan(at[i], n), 0});
      who.push_back(i);
      at[i] += n;
      ++next_call[i];
    }
    if (steps.empty()) {
      bool done = true;
      for (size_t i = 0; i < scripts.size(); ++i) done = done && next_call[i] == scripts[i].calls.size();
      if (done) break;
      continue;
    }
    pass.run(steps, [&](size_t s, size_t, std::span<const float> logits) {
      std::vector<float>& dst = out[who[s]].logits;
      dst.insert(dst.end(), logits.begin(), logits.end());
    });
    for (size_t i : who) seqs[i]->end_batch();
  }
  return out;
}

// Bit for bit, so that -0 / +0 or two NaNs differ as the arithmetic would (memcmp of no bytes may
// not be given the null data() of an empty vector).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

bool same_log(const DecisionLog& a, const DecisionLog& b) {
  if (a.batches.size() != b.batches.size() || a.layers.size() != b.layers.size() ||
      a.evictions.size() != b.evictions.size())
    return false;
  for (size_t i = 0; i < a.batches.size(); ++i)
    if (a.batches[i].pos0 != b.batches[i].pos0 || a.batches[i].n_tok != b.batches[i].n_tok) return false;
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const LayerRecord &x = a.layers[i], &y = b.layers[i];
    if (x.batch != y.batch || x.layer != y.layer || x.flags != y.flags ||
        x.keys_attended != y.keys_attended || x.key_lists != y.key_lists || !same_bits(x.scores, y.scores))
      return false;
  }
  for (size_t i = 0; i < a.evictions.size(); ++i)
    if (a.evictions[i].batch != b.evictions[i].batch || a.evictions[i].layer != b.evictions[i].layer ||
        a.evictions[i].positions != b.evictions[i].positions)
      return false;
  return true;
}

// The batch runs on a pool of `threads`, under a shuffled schedule when shuffle_seed is not 0;
// each sequence alone on an ordinary pool of as many threads.
void expect_batched_equals_alone(const std::vector<std::vector<std::string>>& specs, int threads,
                                 const Model& model = stories(), uint64_t shuffle_seed = 0) {
  ThreadPool pool(threads), batch_pool(threads, {shuffle_seed});
  const std::vector<Script> scripts = scripts_with_calls(specs);
  const std::vector<Outcome> batched = run_batched(model, scripts, batch_pool);
  for (size_t i = 0; i < scripts.size(); ++i) {
    const Outcome alone = run_alone(model, scripts[i], pool);
    std::string what = "sequence " + std::to_string(i) + ":";
    for (const auto& spec : scripts[i].specs) what += " " + spec;
    ASSERT_FALSE(alone.logits.empty()) << what;
    EXPECT_TRUE(same_bits(batched[i].logits, alone.logits)) << what << ": logits differ";
    EXPECT_TRUE(same_log(batched[i].log, alone.log)) << what << ": decisions differ";
    EXPECT_FALSE(alone.log.batches.empty() && !scripts[i].specs.empty()) << what << ": nothing logged";
  }
}

TEST(ForwardPass, DenseSequencesBatchedGiveTheirAloneLogitsBitForBit) {
  for (int threads : {1, 2}) expect_batched_equals_alone({{}, {}, {}, {}, {}, {}}, threads);
}

std::vector<std::vector<std::string>> every_policy_family() {
  const std::string predictor = stories_predictor();
  return {
      {},
      {"orthorank:layers=1,3"},
      {"sleb:layers=2"},
      {"kvquant:bits=4,group=16,prefill=quantized", "kvsink:k=3,layer=1,channel=7"},
      {"kvquant:bits=2,group=8,mode=kivi", "pfn:n=2"},
      {"tokenbutler:keep=0.5,predictor=" + predictor},
      {"zipvl:tau=0.9"},
      {"tokenfilter:ratio=0.3"},
      {"attnremove:ratio=0.3"},
      {"h2o:keep=0.5"},
      {"snapkv:keep=0.5,shared=1"},
      {"quest:keep=0.5,page=4"},
      {"streaming:keep=0.5"},
      {"oracle:keep=0.5"},
      {"fixedratio:keep=0.7"},
  };
}

TEST(ForwardPass, EveryPolicyFamilyInOneBatchGivesItsAloneResults) {
  expect_batched_equals_alone(every_policy_family(), 2);
}

// Chunks cut anywhere, claimed in any order by any of three threads: the same bits.
TEST(ForwardPass, EveryPolicyFamilyBatchedUnderShuffledSchedulesGivesItsAloneResults) {
  for (uint64_t seed : {1u, 2u}) expect_batched_equals_alone(every_policy_family(), 3, stories(), seed);
}

// SmolLM2's Q4_1 weights go through the packed integer GEMM, whose token tiles differ with the
// number of rows in a product: a row's result must not.
TEST(ForwardPass, SmolLM2SequencesBatchedGiveTheirAloneResults) {
  const std::string path = source_path("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "SmolLM2 not present (tools/setup.sh fetches it)";
  const auto model = Model::load(path);
  expect_batched_equals_alone({{},
                               {"orthorank:layers=3,5,7"},
                               {"kvquant:bits=4,group=32,prefill=quantized", "pfn:n=4"},
                               {"zipvl:tau=0.975"},
                               {"tokenfilter:ratio=0.3"},
                               {"h2o:keep=0.5,shared=1"},
                               {},
                               {"quest:keep=0.5"}},
                              2, *model);
}

// A call longer than 512 rows in one batch (as a prompt ranked whole runs) goes through the FFN and
// attention in 512-row passes: each row's logits are those of the same tokens in 512-row batches.
void expect_one_long_batch_equals_batches(const Model& model, int threads) {
  ThreadPool pool(threads);
  ForwardPass pass(model, pool);
  const size_t n = 1100, n_vocab = model.config().n_vocab;
  const auto tokens = random_tokens(n, 21);
  const auto collect = [&](std::vector<float>& all) {
    all.assign(n * n_vocab, 0.0f);
    return [&all, n_vocab](size_t row, std::span<const float> logits) {
      std::copy(logits.begin(), logits.end(), all.begin() + static_cast<std::ptrdiff_t>(row * n_vocab));
    };
  };
  Sequence whole(model.config(), n), batched(model.config(), n);
  std::vector<float> one, pieces;
  const std::vector<SequenceStep> step = {{&whole, tokens, 0}};
  const auto sink_one = collect(one);
  pass.run(step, [&](size_t, size_t row, std::span<const float> logits) { sink_one(row, logits); });
  run_call(pass, batched, tokens, 0, collect(pieces));
  EXPECT_TRUE(same_bits(one, pieces)) << threads << " threads";
}

TEST(ForwardPass, OneLongBatchGivesTheLogitsOfShortBatches) {
  for (int threads : {1, 2}) expect_one_long_batch_equals_batches(stories(), threads);
  const std::string path = source_path("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "SmolLM2 not present (tools/setup.sh fetches it)";
  expect_one_long_batch_equals_batches(*Model::load(path), 2);
}

// An observer of every layer's input that reads the attention-input norms or not.
class NormsObserver final : public Policy {
 public:
  explicit NormsObserver(bool reads) : Policy(PolicySpec{"norms-observer", {}}), reads_(reads) {}
  std::vector<HookClaim> claims() const override { return {{Hook::ObserveLayerInput, {}}}; }
  bool reads_normed_input() const override { return reads_; }
  void observe_layer_input(const LayerInput& in) override { given.push_back(in.normed != nullptr); }
  std::vector<bool> given;  // per call and layer: LayerInput::normed was set

 private:
  bool reads_;
};

// ZipVL ranks a prompt whole and reads no attention-input norms, so its 1,100-row prompt is normed
// in 512-row passes; beside a policy that reads them, every row's norms are kept through the layer.
// The logits and ZipVL's decisions are the same bit for bit, and LayerInput::normed is set exactly
// when a policy of the stack reads it.
TEST(ForwardPass, NormsInPassesGiveTheResultsOfWholeNorms) {
  const Model& model = stories();
  ThreadPool pool(2);
  const size_t n = 1100;
  const auto tokens = random_tokens(n + 1, 23);
  const auto run = [&](bool reads) {
    Transformer tf(model, pool, n + 1);
    Outcome out;
    tf.set_decision_log(&out.log);
    std::vector<std::unique_ptr<Policy>> policies;
    policies.push_back(builtin_policies().create("zipvl:tau=0.9"));
    auto observer = std::make_unique<NormsObserver>(reads);
    const NormsObserver* seen = observer.get();
    policies.push_back(std::move(observer));
    tf.set_policies(std::make_unique<PolicyStack>(std::move(policies), model));
    for (const auto call : {std::span(tokens).first(n), std::span(tokens).subspan(n)}) {
      const std::span<const float> logits = tf.forward(call, true);
      out.logits.insert(out.logits.end(), logits.begin(), logits.end());
    }
    EXPECT_EQ(seen->given, std::vector<bool>(2 * model.config().n_layers, reads));
    return out;
  };
  const Outcome passes = run(false), whole = run(true);
  EXPECT_TRUE(same_bits(passes.logits, whole.logits));
  EXPECT_TRUE(same_log(passes.log, whole.log));
  size_t skipped = 0;  // ZipVL did skip: the passes ran over a subset of rows
  for (const LayerRecord& r : passes.log.layers)
    for (uint8_t f : r.flags) skipped += !(f & kRanAttention);
  EXPECT_GT(skipped, 0u);
}

TEST(ForwardPass, RejectsABadStepBeforeRunningAny) {
  ThreadPool pool(1);
  ForwardPass pass(stories(), pool);
  Sequence a(stories().config(), 16), b(stories().config(), 16);
  const auto tokens = random_tokens(8, 1);
  const std::vector<int32_t> bad = {-1};
  const auto ignore = [](size_t, size_t, std::span<const float>) {};
  const std::vector<SequenceStep> with_bad_id = {{&a, tokens, 0}, {&b, bad, 0}};
  EXPECT_THROW(pass.run(with_bad_id, ignore), Error);
  const std::vector<SequenceStep> twice = {{&a, tokens, 0}, {&a, tokens, 0}};
  EXPECT_THROW(pass.run(twice, ignore), Error);
  const std::vector<SequenceStep> overflow = {{&a, random_tokens(17, 2), 0}};
  EXPECT_THROW(pass.run(overflow, ignore), Error);
  EXPECT_EQ(a.n_past(), 0u);
  EXPECT_EQ(b.n_past(), 0u);
}

}  // namespace
}  // namespace ts
