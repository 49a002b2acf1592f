// Long-context and synthetic task builders: LongBench loading and prompt formatting, the needle,
// key-value and co-reference generators (determinism, grid placement, budgets) and their scoring.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "eval/coref_task.h"
#include "eval/gen_tasks.h"
#include "test_paths.h"

namespace ts {
namespace {

const std::string kFixtures = source_path("tests/fixtures/eval");

size_t count_words(std::string_view s) {
  size_t n = 0;
  bool in_word = false;
  for (const char c : s) {
    const bool space = c == ' ' || c == '\n';
    n += !space && !in_word;
    in_word = !space;
  }
  return n;
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

TEST(EvalGenTasks, FormatPromptLikePythonFormat) {
  EXPECT_EQ(format_prompt("A {x} and {y}{x} {{literal}}", {{"x", "1"}, {"y", "2"}}), "A 1 and 21 {literal}");
  EXPECT_THROW(format_prompt("{missing}", {{"x", "1"}}), Error);
  EXPECT_THROW(format_prompt("open {x", {{"x", "1"}}), Error);
  EXPECT_THROW(format_prompt("close }", nlohmann::json::object()), Error);
}

TEST(EvalGenTasks, MultiNewsUsesTheOfficialPromptAndLength) {
  const auto ex = load_multi_news(kFixtures);
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(
      ex[0].prompt.rfind("You are given several news passages. Write a one-page summary of all news. \n\n"
                         "News:\nPassage 1:\nThe town council",
                         0),
      0u);
  EXPECT_TRUE(ex[0].prompt.ends_with("\n\nNow, write a one-page summary of all the news.\n\nSummary:"));
  EXPECT_EQ(ex[0].limits.max_new_tokens, 16u);  // the fixture's dataset2maxlen.json
  EXPECT_TRUE(ex[0].truncate_middle);
  EXPECT_EQ(ex[0].metric, GenMetric::RougeL);
  ASSERT_EQ(ex[1].answers.size(), 1u);
  EXPECT_NEAR(score_generation(ex[1], ex[1].answers[0]), 1.0, 1e-12);
  EXPECT_EQ(score_generation(ex[1], "unrelated words only"), 0.0);
}

TEST(EvalGenTasks, BadLongBenchFilesNameFileAndLine) {
  const std::string dir = testing::TempDir() + "/lb_bad";
  std::filesystem::create_directories(dir + "/longbench/config");
  std::filesystem::copy(
      kFixtures + "/longbench/config", dir + "/longbench/config",
      std::filesystem::copy_options::overwrite_existing | std::filesystem::copy_options::recursive);
  std::ofstream(dir + "/longbench/multi_news.jsonl") << R"({"input": "", "context": "x", "answers": ["a"]})"
                                                     << "\n"
                                                     << R"({"input": "", "context": "x", "answers": [3]})"
                                                     << "\n";
  try {
    load_multi_news(dir);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              dir + "/longbench/multi_news.jsonl:2: an item of 'answers' is not a string");
  }
  std::ofstream(dir + "/longbench/config/dataset2maxlen.json") << R"({"qasper": 128})";
  EXPECT_THROW(load_multi_news(dir), Error);
}

TEST(EvalGenTasks, HaystackSentencesSkipHeadingsAndSplitAtPeriods) {
  const auto s =
      haystack_sentences(" \n = Title = \n The cat sat . It was warm. Then it slept \n\n Dogs bark .\n");
  EXPECT_EQ(s, (std::vector<std::string>{"The cat sat .", "It was warm.", "Then it slept", "Dogs bark ."}));
}

std::vector<std::string> numbered_haystack(size_t n) {
  std::vector<std::string> s;
  for (size_t i = 0; i < n; ++i) s.push_back("Filler sentence number " + std::to_string(i) + " goes here.");
  return s;
}

TEST(EvalGenTasks, NeedleGridFitsBudgetAndPlacesTheNeedleAtDepth) {
  RetrievalGrid grid;
  grid.lengths = {300, 600};
  grid.depths = {0.0, 0.5, 1.0};
  grid.per_cell = 2;
  grid.seed = 5;
  const auto haystack = numbered_haystack(500);
  const auto ex = make_needle_examples(haystack, grid, count_words);
  ASSERT_EQ(ex.size(), 12u);
  std::set<std::string> answers;
  for (const GenExample& e : ex) {
    const size_t length = e.cell["length"].get<size_t>();
    const double depth = e.cell["depth"].get<double>();
    ASSERT_EQ(e.answers.size(), 1u);
    const std::string& number = e.answers[0];
    EXPECT_EQ(number.size(), 7u);
    answers.insert(number);
    // Budget: the prompt leaves room for the answer; and it is filled (within a sentence or two).
    const size_t words = count_words(e.prompt);
    EXPECT_LE(words + e.limits.max_new_tokens, length);
    EXPECT_GT(words + e.limits.max_new_tokens + 12, length);
    EXPECT_EQ(occurrences(e.prompt, number), 1u);
    const size_t needle = e.prompt.find("One of the special magic numbers for ");
    const size_t context = e.prompt.find("afterwards.\n") + 12,
                 question = e.prompt.find("\nWhat is the special");
    const double at = double(needle - context) / double(question - context);
    EXPECT_NEAR(at, depth, 0.1) << e.prompt;
    EXPECT_FALSE(e.truncate_middle);
    EXPECT_TRUE(e.limits.stop_at_newline);
    EXPECT_TRUE(e.prompt.ends_with("mentioned in the provided text is"));
  }
  EXPECT_GE(answers.size(), 11u);  // random numbers, not one per cell
  // Deterministic in the seed; another seed gives other needles.
  const auto again = make_needle_examples(haystack, grid, count_words);
  for (size_t i = 0; i < ex.size(); ++i) EXPECT_EQ(ex[i].prompt, again[i].prompt);
  grid.seed = 6;
  EXPECT_NE(make_needle_examples(haystack, grid, count_words)[0].prompt, ex[0].prompt);
  // A length that cannot hold the template is an error.
  grid.lengths = {40};
  EXPECT_THROW(make_needle_examples(haystack, grid, count_words), Error);
}

TEST(EvalGenTasks, KvRetrievalAsksForThePairAtDepth) {
  RetrievalGrid grid;
  grid.kv_pairs = {5, 9};
  grid.depths = {0.0, 0.5, 1.0};
  grid.seed = 1;
  const auto ex = make_kv_examples(grid);
  ASSERT_EQ(ex.size(), 6u);
  for (const GenExample& e : ex) {
    const size_t pairs = e.cell["pairs"].get<size_t>();
    const double depth = e.cell["depth"].get<double>();
    // The JSON object parses and has the stated number of UUID pairs.
    const size_t open = e.prompt.find('{'), close = e.prompt.find("}\n\nKey: \"");
    const auto object = nlohmann::json::parse(e.prompt.substr(open, close - open + 1));
    ASSERT_EQ(object.size(), pairs);
    const std::string key = e.prompt.substr(close + 9, 36);
    ASSERT_TRUE(object.contains(key));
    EXPECT_EQ(e.answers, std::vector<std::string>{object[key].get<std::string>()});
    EXPECT_EQ(key[14], '4');  // UUID version 4
    // The asked pair is at round(depth * (pairs - 1)) in the written order.
    const size_t position = occurrences(e.prompt.substr(0, e.prompt.find("\"" + key + "\": ")), "\": \"");
    EXPECT_EQ(position, size_t(std::lround(depth * double(pairs - 1))));
    EXPECT_TRUE(e.prompt.ends_with("\"\nCorresponding value:"));
    EXPECT_EQ(score_generation(e, " " + e.answers[0] + "\""), 1.0);
    EXPECT_EQ(score_generation(e, e.answers[0].substr(0, 30)), 0.0);
  }
  EXPECT_EQ(make_kv_examples(grid)[3].prompt, ex[3].prompt);
}

TEST(EvalGenTasks, CorefFollowsThePaperTemplate) {
  const auto ex = make_coref_examples(100, 42);
  ASSERT_EQ(ex.size(), 100u);
  std::set<std::string> locations, contexts;
  for (const CorefExample& e : ex) {
    locations.insert(e.location);
    contexts.insert(e.context);
    // "{intro} {loc}. {philosophy}. {food}. {math}. {tieback}:" with the intro ending "The place is:".
    EXPECT_NE(e.context.find("The place is: " + e.location + ". In the spirit of"), std::string::npos);
    EXPECT_NE(e.context.find(".. Savor the delicate"), std::string::npos);
    EXPECT_NE(e.context.find(".. If we compute "), std::string::npos);
    EXPECT_TRUE(e.context.ends_with("?:"));
    EXPECT_EQ(occurrences(e.context, e.location), 1u);
  }
  EXPECT_EQ(contexts.size(), 100u);
  EXPECT_GT(locations.size(), 50u);
  EXPECT_EQ(make_coref_examples(3, 42)[2].context, ex[2].context);  // example i does not depend on n
  EXPECT_NE(make_coref_examples(1, 43)[0].context, ex[0].context);
}

}  // namespace
}  // namespace ts
