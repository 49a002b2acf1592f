// Greedy generation, teacher-forced argmax checks and LongBench's middle truncation on the real
// stories260K model, against brute force (one full forward pass per step, no cache reuse).
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "core/thread_pool.h"
#include "eval/generation.h"
#include "eval/long_eval.h"
#include "model/model.h"
#include "test_paths.h"

namespace ts {
namespace {

class EvalGeneration : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = Model::load(shared_path("models/stories260K.gguf")).release(); }
  static void TearDownTestSuite() { delete model_; }
  static const Tokenizer& tok() { return model_->tokenizer(); }

  // The argmax after `tokens`, from a fresh cache and one call.
  static int32_t brute_force_next(const std::vector<int32_t>& tokens) {
    ThreadPool pool(1);
    Transformer tf(*model_, pool, tokens.size());
    const auto logits = tf.forward(tokens, false);
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  static Model* model_;
};

Model* EvalGeneration::model_ = nullptr;

TEST_F(EvalGeneration, GreedyMatchesBruteForceAndTeacherForcingAgrees) {
  const std::vector<int32_t> prompt =
      tok().encode("Once upon a time, there was a little girl named", true, true);
  ThreadPool pool(2);
  Transformer tf(*model_, pool, 128);
  const std::vector<int32_t> out = greedy_generate(tf, tok(), prompt, {8, false});
  ASSERT_EQ(out.size(), 8u);  // stories260K does not end a story this early
  std::vector<int32_t> seq = prompt;
  for (const int32_t t : out) {
    EXPECT_EQ(t, brute_force_next(seq)) << "at generated token " << seq.size() - prompt.size();
    seq.push_back(t);
  }
  // Teacher-forcing the greedy continuation: every token is the argmax; a changed one is not.
  TokenizedPair pair{prompt, out};
  const std::vector<bool> hits = argmax_hits(tf, pair);
  EXPECT_EQ(hits, std::vector<bool>(out.size(), true));
  pair.continuation[3] = out[3] == 100 ? 101 : 100;
  const std::vector<bool> changed = argmax_hits(tf, pair);
  EXPECT_FALSE(changed[3]);
  EXPECT_TRUE(changed[0] && changed[1] && changed[2]);
}

TEST_F(EvalGeneration, GenerationStopsAtTheContextEnd) {
  const std::vector<int32_t> prompt = tok().encode("Tom had a red ball.", true, true);
  ThreadPool pool(1);
  Transformer tf(*model_, pool, prompt.size() + 4);
  // The last generated token needs no forward pass, so 5 tokens fit a cache with room for 4 more.
  EXPECT_EQ(greedy_generate(tf, tok(), prompt, {50, false}).size(), 5u);
  Transformer small(*model_, pool, prompt.size() - 1);
  EXPECT_THROW(greedy_generate(small, tok(), prompt, {5, false}), Error);
}

TEST_F(EvalGeneration, MiddleTruncationKeepsBothEnds) {
  std::string text = "Lily went to the park.";
  for (int i = 0; i < 30; ++i) text += " The dog ran and jumped over the fence.";
  text += " The end came at last.";
  EXPECT_EQ(middle_truncate(tok(), "A short story.", 100), "A short story.");
  const std::string cut = middle_truncate(tok(), text, 40);
  EXPECT_TRUE(cut.starts_with("Lily went to the park.")) << cut;
  EXPECT_TRUE(cut.ends_with("The end came at last.")) << cut;
  EXPECT_LT(cut.size(), text.size() / 2);
  const size_t n = tok().encode(cut, false, true).size();
  EXPECT_GE(n, 38u);
  EXPECT_LE(n, 42u);
  // Generated tasks must fit: their prompts are never truncated.
  GenExample ex{text, {"x"}, {8, true}, GenMetric::Contains, false, {}};
  EXPECT_THROW(gen_prompt_tokens(tok(), ex, 64), Error);
  ex.truncate_middle = true;
  EXPECT_LE(gen_prompt_tokens(tok(), ex, 64).size() + 8, 64u + 2);
}

}  // namespace
}  // namespace ts
