// Log-likelihood scoring and perplexity protocols on the real stories260K model, each checked
// against a brute-force computation: one fresh full forward pass, no cache reuse, no batching.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/error.h"
#include "core/thread_pool.h"
#include "eval/loglikelihood.h"
#include "eval/perplexity.h"
#include "eval/token_scoring.h"
#include "model/model.h"
#include "policies/builtin_policies.h"
#include "test_paths.h"

namespace ts {
namespace {

TEST(TokenScore, GreedyIsTheFirstArgMaxAsTorch) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, -2.0f};
  const double log_z = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(-2.0));
  EXPECT_TRUE(token_score(logits.data(), logits.size(), 1).greedy);
  EXPECT_FALSE(token_score(logits.data(), logits.size(), 2).greedy);  // a tie: torch.argmax takes index 1
  EXPECT_FALSE(token_score(logits.data(), logits.size(), 0).greedy);
  EXPECT_NEAR(token_score(logits.data(), logits.size(), 3).log_prob, -2.0 - log_z, 1e-12);
}

class EvalScoring : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = Model::load(shared_path("models/stories260K.gguf")).release(); }
  static void TearDownTestSuite() { delete model_; }

  // Sum of log p(tokens[i] | tokens[..i]) for i >= first, from one forward pass of a new cache
  // (under the given --policy specs).
  static double brute_force(const std::vector<int32_t>& tokens, size_t first,
                            std::vector<double>* each = nullptr, std::span<const std::string> policies = {}) {
    ThreadPool pool(1);
    Transformer tf(*model_, pool, tokens.size());
    tf.set_policies(make_policy_stack(policies, *model_));
    const size_t n_vocab = model_->config().n_vocab;
    const auto logits = tf.forward(std::span(tokens).first(tokens.size() - 1), true);
    double sum = 0.0;
    for (size_t i = first; i < tokens.size(); ++i) {
      const double lp = token_log_prob(&logits[(i - 1) * n_vocab], n_vocab, tokens[i]);
      if (each) each->push_back(lp);
      sum += lp;
    }
    return sum;
  }

  static std::vector<int32_t> random_tokens(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(n);
    for (auto& x : t) x = static_cast<int32_t>(3 + rng() % 500);
    return t;
  }

  static const Tokenizer& tok() { return model_->tokenizer(); }
  static Model* model_;
};

Model* EvalScoring::model_ = nullptr;

TEST_F(EvalScoring, EncodePairSplitsLikeLmEval) {
  ASSERT_TRUE(tok().add_bos_default());  // stories260K is a SentencePiece model that adds BOS
  const TokenizedPair p = encode_pair(tok(), "Once upon a time", " there was a dog");
  EXPECT_EQ(p.context, tok().encode("Once upon a time", true, true));
  const auto whole = tok().encode("Once upon a time there was a dog", true, true);
  ASSERT_EQ(p.context.size() + p.continuation.size(), whole.size());
  EXPECT_TRUE(
      std::equal(p.continuation.begin(), p.continuation.end(), whole.end() - std::ssize(p.continuation)));
  // Trailing whitespace of the context moves to the continuation.
  const TokenizedPair moved = encode_pair(tok(), "Once upon a time ", "there was a dog");
  EXPECT_EQ(moved.context, p.context);
  EXPECT_EQ(moved.continuation, p.continuation);
  EXPECT_THROW(encode_pair(tok(), "", "x"), Error);
}

TEST_F(EvalScoring, ScorerWithPrefixReuseMatchesBruteForce) {
  const std::vector<std::pair<std::string, std::string>> requests = {
      {"Lily went to the park.", " She saw a big dog."},
      {"Lily went to the park.", " She saw a small cat and ran after it."},
      {"Lily went to the park.", " The sun was hot."},  // same context again after a longer one
      {"Tom had a red ball.", " He threw it high."},    // little in common with the cache
      {"Tom had a red ball and", " a blue car."},       // extends the previous context
  };
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    Transformer tf(*model_, pool, 64);
    LoglikelihoodScorer scorer(tf);
    for (const auto& [context, continuation] : requests) {
      const TokenizedPair p = encode_pair(tok(), context, continuation);
      std::vector<int32_t> all = p.context;
      all.insert(all.end(), p.continuation.begin(), p.continuation.end());
      EXPECT_NEAR(scorer.score(p).log_prob, brute_force(all, p.context.size()), 2e-4)
          << threads << " threads: " << context << continuation;
    }
  }
}

TEST_F(EvalScoring, UnderAWholeCallPolicyEachRequestIsOneFreshCall) {
  // OrthoRank ranks the tokens of a call together (Transformer::ranks_whole_calls): the scorer
  // then recomputes every request as one call, whatever the cache held before.
  const std::vector<std::string> policy = {"orthorank:layers=1,3,ratio=0.5"};
  ThreadPool pool(2);
  Transformer tf(*model_, pool, 64);
  tf.set_policies(make_policy_stack(policy, *model_));
  ASSERT_TRUE(tf.ranks_whole_calls());
  LoglikelihoodScorer scorer(tf);
  for (const char* continuation : {" She saw a big dog.", " The sun was hot and the sky was blue."}) {
    const TokenizedPair p = encode_pair(tok(), "Lily went to the park with her mom.", continuation);
    std::vector<int32_t> all = p.context;
    all.insert(all.end(), p.continuation.begin(), p.continuation.end());
    EXPECT_NEAR(scorer.score(p).log_prob, brute_force(all, p.context.size(), nullptr, policy), 2e-4)
        << continuation;
  }
}

TEST_F(EvalScoring, ScorerLeftTruncatesLikeLmEval) {
  // lm-eval feeds (context + continuation)[-(max_length + 1):][:-1].
  const TokenizedPair p{random_tokens(30, 1), random_tokens(6, 2)};
  std::vector<int32_t> all = p.context;
  all.insert(all.end(), p.continuation.begin(), p.continuation.end());
  ThreadPool pool(1);
  Transformer tf(*model_, pool, 20);
  LoglikelihoodScorer scorer(tf);
  const std::vector<int32_t> kept(all.end() - 21, all.end());
  EXPECT_NEAR(scorer.score(p).log_prob, brute_force(kept, kept.size() - 6), 2e-4);
  const TokenizedPair too_long{random_tokens(3, 3), random_tokens(25, 4)};
  EXPECT_THROW(scorer.score(too_long), Error);
}

TEST_F(EvalScoring, ScoreTokensFromAWarmCache) {
  const auto tokens = random_tokens(40, 5);
  std::vector<double> want;
  brute_force(tokens, 25, &want);
  ThreadPool pool(2);
  Transformer tf(*model_, pool, 64);
  tf.forward(std::span(tokens).first(10), false);  // the cache already holds the first 10
  std::vector<double> got;
  score_tokens(tf, tokens, 10, 25, [&](const TokenScore& s) { got.push_back(s.log_prob); });
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4) << i;
  EXPECT_EQ(tf.n_past(), tokens.size() - 1);
  EXPECT_THROW(score_tokens(tf, tokens, 25, 25, [](const TokenScore&) {}), Error);
}

TEST_F(EvalScoring, StridedWindowCount) {
  EXPECT_EQ(strided_window_count(100, 100, 10), 1u);
  EXPECT_EQ(strided_window_count(50, 100, 10), 1u);
  EXPECT_EQ(strided_window_count(101, 100, 10), 2u);
  EXPECT_EQ(strided_window_count(110, 100, 10), 2u);
  EXPECT_EQ(strided_window_count(111, 100, 10), 3u);
  EXPECT_EQ(strided_window_count(400, 100, 100), 4u);
}

TEST_F(EvalScoring, StridedPerplexityScoresEachTokenOnceWithItsWindow) {
  const auto tokens = random_tokens(75, 6);
  const size_t n_ctx = 32, stride = 12;
  ThreadPool pool(2);
  Transformer tf(*model_, pool, n_ctx);
  size_t calls = 0, window_tokens = 0;
  double window_nll = 0.0;  // from the per-window log-probabilities (ppl --samples)
  const PerplexityResult r = perplexity_strided(
      tf, tokens, n_ctx, stride, 0, [&](size_t done, const NllAccumulator&, std::span<const double> lps) {
        calls = done;
        window_tokens += lps.size();
        for (const double lp : lps) window_nll -= lp;
      });
  EXPECT_EQ(r.chunks, strided_window_count(tokens.size(), n_ctx, stride));
  EXPECT_EQ(calls, r.chunks);
  EXPECT_EQ(r.acc.count, tokens.size() - 1);
  EXPECT_EQ(window_tokens, r.acc.count);
  EXPECT_NEAR(window_nll, r.acc.nll, 1e-9 * r.acc.nll);
  // HF's loop by hand: window [begin, end) scores [max(prev_end, begin + 1), end).
  double nll = 0.0;
  size_t prev_end = 0;
  for (size_t begin = 0;; begin += stride) {
    const size_t end = std::min(begin + n_ctx, tokens.size());
    const std::vector<int32_t> window(tokens.begin() + std::ptrdiff_t(begin),
                                      tokens.begin() + std::ptrdiff_t(end));
    nll -= brute_force(window, std::max(prev_end, begin + 1) - begin);
    prev_end = end;
    if (end == tokens.size()) break;
  }
  EXPECT_NEAR(r.acc.nll, nll, 1e-3);
}

TEST_F(EvalScoring, DisjointStrideIsGptqAndMaxWindowsCaps) {
  // GPTQ: disjoint windows, each scored on every token but its first (which has no context).
  const auto tokens = random_tokens(100, 7);  // 3 full windows of 32 and a 4-token tail
  ThreadPool pool(1);
  Transformer tf(*model_, pool, 32);
  const PerplexityResult r = perplexity_strided(
      tf, tokens, 32, 32, 3, [](size_t, const NllAccumulator&, std::span<const double>) {});
  EXPECT_EQ(r.chunks, 3u);
  EXPECT_EQ(r.acc.count, 3u * 31);
  double nll = 0.0;
  for (size_t w = 0; w < 3; ++w) {
    const std::vector<int32_t> window(tokens.begin() + std::ptrdiff_t(32 * w),
                                      tokens.begin() + std::ptrdiff_t(32 * w + 32));
    nll -= brute_force(window, 1);
  }
  EXPECT_NEAR(r.acc.nll, nll, 1e-3);
}

// Shards of the windows score what the whole run scores, window for window, bit for bit: overlapping
// strided windows (each shard finds where the window before its first ended) and llama.cpp's.
TEST_F(EvalScoring, WindowShardsAddUpToTheWholeRun) {
  const auto tokens = random_tokens(150, 9);
  ThreadPool pool(1);
  Transformer tf(*model_, pool, 32);
  using Windows = std::vector<std::pair<size_t, std::vector<double>>>;
  const auto run = [&](bool strided, const Shard& shard, Windows* windows) {
    const OnWindow record = [&](size_t done, const NllAccumulator&, std::span<const double> lps) {
      windows->push_back({done, std::vector<double>(lps.begin(), lps.end())});
    };
    return strided ? perplexity_strided(tf, tokens, 32, 12, 0, record, shard)
                   : perplexity_windows(tf, tokens, 32, 0, tok().bos(), record, shard);
  };
  for (const bool strided : {true, false}) {
    Windows whole, parts;
    const PerplexityResult all = run(strided, {}, &whole);
    size_t chunks = 0;
    for (size_t i = 0; i < 3; ++i) chunks += run(strided, {i, 3}, &parts).chunks;
    EXPECT_EQ(chunks, all.chunks);
    EXPECT_EQ(parts, whole) << (strided ? "strided" : "llamacpp");
  }
}

TEST_F(EvalScoring, LlamaCppWindowsScoreTheSecondHalf) {
  const auto tokens = random_tokens(64, 8);
  ThreadPool pool(1);
  Transformer tf(*model_, pool, 32);
  const PerplexityResult r = perplexity_windows(
      tf, tokens, 32, 0, tok().bos(), [](size_t, const NllAccumulator&, std::span<const double>) {});
  EXPECT_EQ(r.chunks, 2u);
  EXPECT_EQ(r.acc.count, 2u * 15);
  double nll = 0.0;
  for (size_t w = 0; w < 2; ++w) {
    std::vector<int32_t> window(tokens.begin() + std::ptrdiff_t(32 * w),
                                tokens.begin() + std::ptrdiff_t(32 * w + 32));
    window[0] = tok().bos();
    nll -= brute_force(window, 17);
  }
  EXPECT_NEAR(r.acc.nll, nll, 1e-3);
}

}  // namespace
}  // namespace ts
