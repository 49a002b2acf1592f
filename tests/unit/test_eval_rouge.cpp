// ROUGE-L against Google's rouge-score package: tests/fixtures/eval/rouge_l.json holds its scores
// for fixed string pairs (written by tools/make_rouge_fixture.py).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "eval/data_file.h"
#include "eval/rouge.h"
#include "test_paths.h"

namespace ts {
namespace {

TEST(EvalRouge, TokensLowercaseAndSplitOnNonAlphanumerics) {
  EXPECT_EQ(rouge_tokens("It's 2024 -- Café!"), (std::vector<std::string>{"it", "s", "2024", "caf"}));
  EXPECT_TRUE(rouge_tokens(" ... \n").empty());
}

TEST(EvalRouge, MatchesRougeScorePackage) {
  const auto cases = nlohmann::json::parse(read_text_file(source_path("tests/fixtures/eval/rouge_l.json")));
  ASSERT_GE(cases.size(), 8u);
  for (const auto& c : cases) {
    const RougeScore s = rouge_l(c["reference"].get<std::string>(), c["prediction"].get<std::string>());
    EXPECT_NEAR(s.precision, c["precision"].get<double>(), 1e-12) << c.dump();
    EXPECT_NEAR(s.recall, c["recall"].get<double>(), 1e-12) << c.dump();
    EXPECT_NEAR(s.f, c["f"].get<double>(), 1e-12) << c.dump();
  }
}

TEST(EvalRouge, LcsIsOrderSensitiveAndAsymmetricInPrecisionRecall) {
  const RougeScore s = rouge_l("a b c d", "a c");  // LCS 2 of 4 reference, 2 of 2 predicted tokens
  EXPECT_DOUBLE_EQ(s.precision, 1.0);
  EXPECT_DOUBLE_EQ(s.recall, 0.5);
  EXPECT_DOUBLE_EQ(s.f, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(rouge_l("a b c d", "d c b a").f, 0.25);
}

}  // namespace
}  // namespace ts
