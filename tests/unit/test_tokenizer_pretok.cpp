// Pre-tokenizer splits. Expected pieces come from HF tokenizers 0.23.3 (the pre-tokenizers that
// tools/hf_tokenizer_from_gguf.py builds, applied with pre_tokenize_str). More cases are checked
// by tests/python/test_tokenizer_hf.py, which writes HF's splits to the file TS_PRETOK_CASES
// names and runs TokenizerPretok.MatchesHfCasesFromFile.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "model/pretokenizer.h"

namespace ts {
namespace {

std::vector<std::string> split(PreTokenizer kind, std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view piece : pre_tokenize(kind, text)) out.emplace_back(piece);
  return out;
}

struct Case {
  PreTokenizer kind;
  std::string text;
  std::vector<std::string> pieces;
};

const Case kCases[] = {
    {PreTokenizer::Gpt2, "Hello world's  end", {"Hello", " world", "'s", " ", " end"}},
    {PreTokenizer::Gpt2, "x  \n\n  y", {"x", "  \n\n ", " y"}},
    {PreTokenizer::Gpt2, "I'M 'll", {"I", "'", "M", " '", "ll"}},
    {PreTokenizer::Gpt2, "abc123 def 4567", {"abc", "123", " def", " 4567"}},
    {PreTokenizer::Gpt2, " !?  .", {" !?", " ", " ."}},
    {PreTokenizer::SmolLM, "abc123 def 4567", {"abc", "1", "2", "3", " def", " ", "4", "5", "6", "7"}},
    {PreTokenizer::SmolLM, "v2.0 ²", {"v", "2", ".", "0", " ", "²"}},
    {PreTokenizer::SmolLM, " 1 2", {" ", "1", " ", "2"}},
    {PreTokenizer::Llama3, "Hello world's  end", {"Hello", " world", "'s", " ", " end"}},
    {PreTokenizer::Llama3, "I'M 'LL ſ", {"I", "'M", " '", "LL", " ſ"}},
    {PreTokenizer::Llama3, "1234567 x", {"123", "456", "7", " x"}},
    {PreTokenizer::Llama3, "\tTab\n\n  next", {"\tTab", "\n\n", " ", " next"}},
    {PreTokenizer::Llama3, "!!!\n\nok", {"!!!\n\n", "ok"}},
    {PreTokenizer::Llama3, "  \n x", {"  \n", " x"}},
    {PreTokenizer::Qwen2, "1234567 x", {"1", "2", "3", "4", "5", "6", "7", " x"}},
    {PreTokenizer::Qwen2, "中文 text", {"中文", " text"}},
    {PreTokenizer::Qwen2, "a,b\r\n\r\n c", {"a", ",b", "\r\n\r\n", " c"}},
};

TEST(TokenizerPretok, MatchesHfOnKnownCases) {
  for (const Case& c : kCases) EXPECT_EQ(split(c.kind, c.text), c.pieces) << c.text;
}

TEST(TokenizerPretok, NamesMapToKinds) {
  EXPECT_EQ(pre_tokenizer_from_name(""), PreTokenizer::Gpt2);
  EXPECT_EQ(pre_tokenizer_from_name("default"), PreTokenizer::Gpt2);
  EXPECT_EQ(pre_tokenizer_from_name("smollm"), PreTokenizer::SmolLM);
  EXPECT_EQ(pre_tokenizer_from_name("llama-bpe"), PreTokenizer::Llama3);
  EXPECT_EQ(pre_tokenizer_from_name("qwen2"), PreTokenizer::Qwen2);
  EXPECT_EQ(pre_tokenizer_from_name("tekken"), std::nullopt);
}

TEST(TokenizerPretok, PiecesAreNonEmptyAndCoverArbitraryBytes) {
  std::mt19937 rng(42);
  const std::string alphabet[] = {"a", "Z", "1",  " ", "\n",   "\r",   "\t",   "'", "s",
                                  "!", "é", "中", "😀", "\xFF", "\xE2", "\x80", "²", "\xC2\xA0"};
  for (int iter = 0; iter < 2000; ++iter) {
    std::string text;
    const int n = static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) text += alphabet[rng() % std::size(alphabet)];
    for (PreTokenizer kind :
         {PreTokenizer::Gpt2, PreTokenizer::SmolLM, PreTokenizer::Llama3, PreTokenizer::Qwen2}) {
      std::string joined;
      for (const std::string& p : split(kind, text)) {
        ASSERT_FALSE(p.empty());
        joined += p;
      }
      ASSERT_EQ(joined, text);
    }
  }
}

TEST(TokenizerPretok, MatchesHfCasesFromFile) {
  const char* path = std::getenv("TS_PRETOK_CASES");
  if (!path) GTEST_SKIP() << "TS_PRETOK_CASES not set (tests/python/test_tokenizer_hf.py sets it)";
  std::ifstream f(path);
  ASSERT_TRUE(f) << path;
  const nlohmann::json cases = nlohmann::json::parse(f);
  size_t mismatches = 0;
  for (const nlohmann::json& c : cases) {
    const std::optional<PreTokenizer> kind = pre_tokenizer_from_name(c.at("pre").get<std::string>());
    ASSERT_TRUE(kind) << c.at("pre");
    const std::string text = c.at("text");
    const auto expected = c.at("pieces").get<std::vector<std::string>>();
    if (split(*kind, text) != expected && ++mismatches <= 10) {
      ADD_FAILURE() << c.at("pre") << " split of " << nlohmann::json(text) << " differs from HF";
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << cases.size() << " cases";
}

}  // namespace
}  // namespace ts
