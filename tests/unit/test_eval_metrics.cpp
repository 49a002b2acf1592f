// acc / acc_norm / stderr as lm-evaluation-harness computes them, example selection, and the
// perplexity corpora.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "core/error.h"
#include "eval/mc_metrics.h"
#include "eval/ppl_datasets.h"
#include "eval/subset.h"
#include "test_paths.h"

namespace ts {
namespace {

McExample example(std::vector<size_t> norm_lengths, size_t gold) {
  McExample ex;
  for (size_t n : norm_lengths) ex.choices.push_back({"ctx", "cont", n});
  ex.gold = gold;
  return ex;
}

TEST(EvalMetrics, AccIsArgmaxAndAccNormDividesByLength) {
  const McExample ex = example({2, 10}, 0);  // choice lengths 2 and 10, gold 0
  // lls -6 and -5: argmax is 1; normalized -3.0 and -0.5: argmax is still 1.
  McOutcome o = judge(ex, {-6.0, -5.0});
  EXPECT_FALSE(o.correct);
  EXPECT_FALSE(o.correct_norm);
  // lls -6 and -7: argmax 0; normalized -3.0 and -0.7: argmax 1.
  o = judge(ex, {-6.0, -7.0});
  EXPECT_TRUE(o.correct);
  EXPECT_FALSE(o.correct_norm);
  // Ties go to the first choice, as np.argmax.
  o = judge(example({3, 3}, 0), {-1.0, -1.0});
  EXPECT_TRUE(o.correct);
  EXPECT_TRUE(o.correct_norm);
  EXPECT_THROW(judge(ex, {-1.0}), Error);
}

TEST(EvalMetrics, StderrIsSampleStddevOverSqrtN) {
  const std::vector<int> correct = {1, 0, 1, 1, 0, 1, 1};
  McAccumulator acc;
  for (int c : correct) acc.add({c == 1, c == 0});
  const McMetrics m = acc.metrics();
  EXPECT_EQ(m.n, 7u);
  EXPECT_DOUBLE_EQ(m.acc, 5.0 / 7);
  EXPECT_DOUBLE_EQ(m.acc_norm, 2.0 / 7);
  // lm-eval: sqrt(sum((x - mean)^2) / (n - 1)) / sqrt(n)
  double ss = 0;
  for (int c : correct) ss += (c - 5.0 / 7) * (c - 5.0 / 7);
  EXPECT_NEAR(m.acc_stderr, std::sqrt(ss / 6) / std::sqrt(7.0), 1e-15);
  McAccumulator one;
  one.add({true, true});
  EXPECT_EQ(one.metrics().acc_stderr, 0.0);
}

TEST(EvalSubset, FirstNOrSeededSample) {
  EXPECT_EQ(select_examples(5, 0, std::nullopt), (std::vector<size_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(select_examples(5, 9, 7), (std::vector<size_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(select_examples(5, 3, std::nullopt), (std::vector<size_t>{0, 1, 2}));
  const auto a = select_examples(1000, 20, 42), b = select_examples(1000, 20, 42),
             c = select_examples(1000, 20, 43);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(std::set<size_t>(a.begin(), a.end()).size(), 20u);
  EXPECT_LT(a.back(), 1000u);
  EXPECT_NE(a, select_examples(1000, 20, std::nullopt));
}

TEST(EvalSubset, ShardsTakeEveryItemOnceInOrder) {
  for (const size_t n : {0u, 1u, 5u, 7u, 1000u})
    for (const size_t count : {1u, 2u, 3u, 8u}) {
      size_t next = 0;
      for (size_t i = 0; i < count; ++i) {
        const auto [begin, end] = Shard{i, count}.range(n);
        EXPECT_EQ(begin, next) << n << " items, shard " << i << "/" << count;
        EXPECT_LE(end - begin, n / count + 1);  // balanced: sizes differ by at most one
        next = end;
      }
      EXPECT_EQ(next, n);
    }
  EXPECT_EQ(parse_shard("2/5").index, 2u);
  EXPECT_EQ(parse_shard("2/5").count, 5u);
  for (const char* bad : {"", "1", "5/5", "-1/4", "1/0", "a/b", "1/4x", "1//4", "1234567890/9999999999"})
    EXPECT_THROW(parse_shard(bad), Error) << bad;
}

TEST(EvalPplCorpus, C4JoinsDocumentsWithSpacesAndCapsWindows) {
  const PplCorpus c4 = load_ppl_corpus("c4", source_path("tests/fixtures/eval"));
  EXPECT_EQ(c4.text, "First document.\nIt has two lines. Second document. Third.");
  EXPECT_EQ(c4.max_windows, kC4Windows);
  const PplCorpus wiki = load_ppl_corpus("wikitext2", source_path("tests/fixtures/eval"));
  EXPECT_EQ(wiki.text, " \n = Test Article = \n \n Once upon a time there was a test .\n");
  EXPECT_EQ(wiki.max_windows, 0u);
  EXPECT_THROW(load_ppl_corpus("ptb", "."), Error);
  EXPECT_THROW(load_ppl_corpus("c4", "/nonexistent"), Error);
}

}  // namespace
}  // namespace ts
