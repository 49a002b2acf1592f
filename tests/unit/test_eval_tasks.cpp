// Task loaders and prompt builders against lm-evaluation-harness: the expected (context,
// continuation) strings below are what lm-eval 0.4.13's own task configs build from the same
// fixture files (tests/fixtures/eval, fed through tools/lm_eval_parity.py's dataset adapter).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "eval/mc_tasks.h"
#include "eval/python_text.h"
#include "test_paths.h"

namespace ts {
namespace {

const std::string kFixtures = source_path("tests/fixtures/eval");

struct Expected {
  std::string context, continuation;
  size_t norm_length;
};

void expect_example(const McExample& ex, size_t gold, const std::vector<Expected>& want) {
  EXPECT_EQ(ex.gold, gold);
  ASSERT_EQ(ex.choices.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(ex.choices[i].context, want[i].context) << "choice " << i;
    EXPECT_EQ(ex.choices[i].continuation, want[i].continuation) << "choice " << i;
    EXPECT_EQ(ex.choices[i].norm_length, want[i].norm_length) << "choice " << i;
  }
}

TEST(EvalTasks, Piqa) {
  const auto ex = load_piqa(kFixtures);
  ASSERT_EQ(ex.size(), 3u);  // the blank line in the file is skipped
  expect_example(ex[0], 0,
                 {{"Question: How do I keep bread fresh?\nAnswer:", " Store it in a paper bag.", 24},
                  {"Question: How do I keep bread fresh?\nAnswer:", " Store it in a bucket of water.", 30}});
  // Whitespace inside and at the end of a solution is kept, as lm-eval keeps it.
  expect_example(ex[1], 0,
                 {{"Question: stapler\nAnswer:", " can join two sheets of paper ", 29},
                  {"Question: stapler\nAnswer:", " can join two  rivers", 20}});
  EXPECT_EQ(ex[2].gold, 1u);
}

TEST(EvalTasks, ArcWithLetterAndNumberLabels) {
  const auto easy = load_arc_easy(kFixtures);
  ASSERT_EQ(easy.size(), 2u);
  const std::string q0 = "Question: Which object is a source of light?\nAnswer:";
  expect_example(easy[0], 1, {{q0, " a mirror", 8}, {q0, " the Sun", 7}, {q0, " the Moon", 8}});
  EXPECT_EQ(easy[1].gold, 0u);  // answerKey "1" is the first label
  EXPECT_EQ(easy[1].choices.size(), 4u);
  const auto challenge = load_arc_challenge(kFixtures);
  ASSERT_EQ(challenge.size(), 1u);
  EXPECT_EQ(challenge[0].gold, 2u);
  EXPECT_EQ(challenge[0].choices.size(), 5u);
  EXPECT_EQ(challenge[0].choices[4].continuation, " salt dissolving");
}

TEST(EvalTasks, HellaswagPreprocessAndCapitalize) {
  const auto ex = load_hellaswag(kFixtures);
  ASSERT_EQ(ex.size(), 2u);
  const std::string c0 = "Baking cookies: A man pours flour into a bowl. He then adds sugar";
  expect_example(ex[0], 2,
                 {{c0, " and throws the bowl away.", 25},
                  {c0, " and sings loudly.", 17},
                  {c0, " and stirs the mixture with a spoon.", 35},
                  {c0, " and leaves the kitchen.", 23}});
  const std::string c1 = "Home and Garden: How to water a plant. Check the soil.";
  expect_example(ex[1], 0,
                 {{c1, "  Push a finger into the soil If it is dry, water it.", 52},
                  {c1, " Paint the pot [blue.", 20},
                  {c1, " Sell the plant.", 15},
                  {c1, "  Ignore it.", 11}});
}

TEST(EvalTasks, HellaswagPreprocessMatchesPythonRegexRules) {
  EXPECT_EQ(hellaswag_preprocess("  a [x] b  "), "a b");
  EXPECT_EQ(hellaswag_preprocess("a [title] b"), "a. b");
  EXPECT_EQ(hellaswag_preprocess("a [x [y] z] b"), "a z] b");   // lazy: up to the first ']'
  EXPECT_EQ(hellaswag_preprocess("a [x\ny] b"), "a [x\ny] b");  // '.' does not cross a newline
  EXPECT_EQ(hellaswag_preprocess("a   b"), "a  b");             // one replace pass, not a collapse
  EXPECT_EQ(hellaswag_preprocess("[a]"), "");
}

TEST(EvalTasks, WinograndePartialScoring) {
  const auto ex = load_winogrande(kFixtures);
  ASSERT_EQ(ex.size(), 2u);
  // The option completes the context; acc_norm divides by the context's length (lm-eval's choices).
  expect_example(ex[0], 0,
                 {{"The trophy did not fit in the case because the trophy", " was too big.", 53},
                  {"The trophy did not fit in the case because the case", " was too big.", 51}});
  expect_example(ex[1], 0,
                 {{"Maria", " gave Anna a book because Maria had finished reading it.", 5},
                  {"Anna", " gave Anna a book because Maria had finished reading it.", 4}});
  EXPECT_THROW(winogrande_example("no blank here", "a", "b", 0), Error);
}

TEST(EvalTasks, BoolqPromptRebuiltFromQuery) {
  const auto ex = load_boolq(kFixtures);
  ASSERT_EQ(ex.size(), 2u);
  const std::string c0 =
      "Owls are birds that hunt mostly at night.\nQuestion: do owls hunt at night?\nAnswer:";
  expect_example(ex[0], 1, {{c0, " no", 2}, {c0, " yes", 3}});
  EXPECT_EQ(ex[1].gold, 0u);
}

TEST(EvalTasks, RegistryAndUnknownTask) {
  std::vector<std::string> names;
  for (const McTask& t : mc_tasks()) names.emplace_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"piqa", "arc_easy", "arc_challenge", "hellaswag", "winogrande",
                                             "boolq"}));
  EXPECT_EQ(find_mc_task("boolq").load(kFixtures).size(), 2u);
  try {
    find_mc_task("mmlu");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown task 'mmlu'"), std::string::npos) << e.what();
  }
}

TEST(EvalTasks, PythonStringRules) {
  EXPECT_EQ(py::strip(" \t\x1f a b \n\r\v\f"), "a b");
  EXPECT_EQ(py::rstrip("Answer: \n"), "Answer:");
  EXPECT_EQ(py::capitalize("hELLO World"), "Hello world");
  EXPECT_EQ(py::capitalize(""), "");
  EXPECT_EQ(py::replace("aaaa", "aa", "a"), "aa");
  EXPECT_EQ(py::length("na\xc3\xafve \xe2\x82\xac"), 7u);  // "naïve €": code points, not bytes
}

// A data directory in a temporary folder holding one file, for the error cases.
class EvalBadData : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ts_eval_bad_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& rel, const std::string& text) {
    const auto path = dir_ / rel;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }
  // Runs the loader and returns its error message.
  std::string error_of(std::vector<McExample> (*load)(const std::string&)) {
    try {
      load(dir_.string());
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  }
  std::filesystem::path dir_;
};

TEST_F(EvalBadData, InvalidJsonNamesFileAndLine) {
  const std::string path =
      write("boolq/boolq_validation.llmfoundry.jsonl",
            R"({"query": "Passage: a\nQuestion: b?", "choices": ["no", "yes"], "gold": 1})"
            "\n{\"query\": oops}\n");
  const std::string err = error_of(load_boolq);
  EXPECT_EQ(err.rfind(path + ":2: invalid JSON", 0), 0u) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

TEST_F(EvalBadData, MissingFieldAndWrongType) {
  write("piqa/original/valid.jsonl", R"({"goal": "g", "sol1": "a"})"
                                     "\n");
  write("piqa/original/valid-labels.lst", "0\n");
  EXPECT_NE(error_of(load_piqa).find("valid.jsonl:1: missing field 'sol2'"), std::string::npos);
  write("hellaswag/hellaswag_val.random1000.orig.jsonl",
        R"({"activity_label": "x", "ctx_a": "a", "ctx_b": "b", "endings": ["e", 3], "label": 0})"
        "\n");
  EXPECT_NE(error_of(load_hellaswag).find(":1: 'endings' item 1 is not a string"), std::string::npos);
}

TEST_F(EvalBadData, LabelFiles) {
  write("winogrande/original/dev.jsonl", R"({"sentence": "_ x", "option1": "a", "option2": "b"})"
                                         "\n");
  write("winogrande/original/dev-labels.lst", "3\n");
  EXPECT_NE(error_of(load_winogrande).find("dev-labels.lst:1: expected a label from 1 to 2, got '3'"),
            std::string::npos);
  write("winogrande/original/dev-labels.lst", "1\n2\n");
  EXPECT_NE(error_of(load_winogrande).find("dev-labels.lst: 2 labels for 1 records"), std::string::npos);
  EXPECT_NE(error_of(load_piqa).find("valid.jsonl: cannot open file"), std::string::npos);
}

TEST_F(EvalBadData, SemanticErrors) {
  write("arc/original/ARC-Easy-Test.jsonl",
        R"({"question": {"stem": "q", "choices": [{"text": "t", "label": "A"}]}, "answerKey": "B"})"
        "\n");
  EXPECT_NE(error_of(load_arc_easy).find(":1: answerKey 'B' is not among the choice labels"),
            std::string::npos);
  write("winogrande/original/dev.jsonl", R"({"sentence": "no blank", "option1": "a", "option2": "b"})"
                                         "\n");
  EXPECT_NE(error_of(load_winogrande).find("dev.jsonl:1: the sentence has no '_'"), std::string::npos);
  write("boolq/boolq_validation.llmfoundry.jsonl", R"({"query": "q?", "choices": ["no", "yes"], "gold": 1})"
                                                   "\n");
  EXPECT_NE(error_of(load_boolq).find(":1: query is not"), std::string::npos);
}

}  // namespace
}  // namespace ts
