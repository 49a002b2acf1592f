// Tokenizers built from small in-memory GGUFs: metadata handling, errors, special tokens.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "core/error.h"
#include "gguf_writer.h"
#include "model/gguf.h"
#include "model/tokenizer.h"

namespace ts {
namespace {

using test::GgufWriter;
using test::WValue;
using Ids = std::vector<int32_t>;
using Metadata = std::map<std::string, WValue>;

constexpr int32_t kControl = 3, kUserDefined = 4, kByte = 6;

// A llama vocabulary: <unk> <s> </s>, 256 byte tokens (ids 3..258), then pieces.
Metadata llama_metadata() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, kControl, kControl};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.push_back(buf);
    types.push_back(kByte);
  }
  // 259 ▁, 260 a, 261 b, 262 ▁a, 263 ab, 264 ▁ab, 265 <|user|>, 266 <|im_end|>
  for (const char* t : {"▁", "a", "b", "▁a", "ab", "▁ab", "<|user|>", "<|im_end|>"}) tokens.push_back(t);
  for (int32_t t : {1, 1, 1, 1, 1, 1, kUserDefined, kControl}) types.push_back(t);
  std::vector<float> scores(tokens.size(), 0.0f);
  scores[262] = -1;  // ▁a merges before ab
  scores[263] = -2;
  scores[264] = -3;
  return {{"tokenizer.ggml.model", WValue::str("llama")},
          {"tokenizer.ggml.tokens", WValue::strings(tokens)},
          {"tokenizer.ggml.scores", WValue::numbers(GgufValueType::F32, scores)},
          {"tokenizer.ggml.token_type", WValue::numbers(GgufValueType::I32, types)},
          {"tokenizer.ggml.bos_token_id", WValue::u32(1)},
          {"tokenizer.ggml.eos_token_id", WValue::u32(2)},
          {"tokenizer.ggml.unknown_token_id", WValue::u32(0)},
          {"tokenizer.ggml.padding_token_id", WValue::u32(0xFFFFFFFF)}};
}

// GPT-2's byte alphabet spelling of byte b.
std::string spell(int b) {
  const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
  int cp = b;
  if (!printable) {
    cp = 256;
    for (int x = 0; x < b; ++x) cp += !((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE);
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// A byte-level vocabulary: byte b is token b, then merged pieces and special tokens.
Metadata gpt2_metadata() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(spell(b));
  // 256 he, 257 ll, 258 hell, 259 Ġw, 260 <|endoftext|>, 261 <|im_start|>, 262 <think>, 263 <a>, 264 <a><b>
  for (const char* t :
       {"he", "ll", "hell", "Ġw", "<|endoftext|>", "<|im_start|>", "<think>", "<a>", "<a><b>"}) {
    tokens.push_back(t);
  }
  std::vector<int32_t> types(tokens.size(), 1);
  types[260] = types[261] = types[263] = types[264] = kControl;
  types[262] = kUserDefined;
  return {{"tokenizer.ggml.model", WValue::str("gpt2")},
          {"tokenizer.ggml.pre", WValue::str("default")},
          {"tokenizer.ggml.tokens", WValue::strings(tokens)},
          {"tokenizer.ggml.token_type", WValue::numbers(GgufValueType::I32, types)},
          {"tokenizer.ggml.merges", WValue::strings({"h e", "l l", "he ll", "Ġ w"})},
          {"tokenizer.ggml.eos_token_id", WValue::u32(260)},
          {"tokenizer.ggml.add_bos_token", WValue::boolean(false)}};
}

struct Built {
  std::vector<uint8_t> bytes;
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<Tokenizer> tok;
};

std::unique_ptr<Built> build(const Metadata& meta) {
  GgufWriter w;
  for (const auto& [k, v] : meta) w.add(k, v);
  auto b = std::make_unique<Built>();
  b->bytes = w.bytes();
  b->gguf = GgufFile::parse(b->bytes, "mem.gguf");
  b->tok = Tokenizer::from_gguf(*b->gguf);
  return b;
}

// The ts::Error message building a tokenizer from `meta` throws ("" if none).
std::string error_of(const Metadata& meta) {
  try {
    build(meta);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

Metadata without(Metadata m, const std::string& key) {
  m.erase(key);
  return m;
}

Metadata with(Metadata m, const std::string& key, WValue v) {
  m.insert_or_assign(key, std::move(v));
  return m;
}

TEST(TokenizerGguf, LlamaMergesByScoreWithByteFallback) {
  auto b = build(llama_metadata());
  const Tokenizer& t = *b->tok;
  EXPECT_EQ(t.encode("ab", false, true), (Ids{264}));
  EXPECT_EQ(t.encode("ab", true, true), (Ids{1, 264}));
  EXPECT_EQ(t.encode("ba", false, true), (Ids{259, 261, 260}));
  EXPECT_EQ(t.encode("c", false, true), (Ids{259, 3 + 'c'}));
  EXPECT_EQ(t.decode(t.encode(" ab c", true, true)), " ab c");
}

TEST(TokenizerGguf, UserDefinedTokensAlwaysMatchControlOnlyWhenParsed) {
  auto b = build(llama_metadata());
  const Tokenizer& t = *b->tok;
  EXPECT_EQ(t.encode("a<|user|>b", false, false), (Ids{262, 265, 259, 261}));
  EXPECT_EQ(t.encode("<|im_end|>", false, true), (Ids{266}));
  EXPECT_NE(t.encode("<|im_end|>", false, false), (Ids{266}));
  EXPECT_TRUE(t.is_end_of_generation(266));  // by its text
  EXPECT_TRUE(t.is_end_of_generation(2));
  EXPECT_FALSE(t.is_end_of_generation(265));
  EXPECT_EQ(t.token_to_bytes(265), "<|user|>");  // user-defined text is always rendered
}

TEST(TokenizerGguf, LlamaWithoutSpacePrefix) {
  auto b = build(with(llama_metadata(), "tokenizer.ggml.add_space_prefix", WValue::boolean(false)));
  EXPECT_EQ(b->tok->encode("ab", false, true), (Ids{263}));
  EXPECT_EQ(b->tok->decode({259, 263}), " ab");  // nothing to strip when no prefix was added
}

TEST(TokenizerGguf, Gpt2MergesByRank) {
  auto b = build(gpt2_metadata());
  const Tokenizer& t = *b->tok;
  EXPECT_FALSE(t.add_bos_default());
  EXPECT_EQ(t.encode("hello", true, true), (Ids{258, 'o'}));  // no BOS id in this file
  EXPECT_EQ(t.encode(" w", false, true), (Ids{259}));
  EXPECT_EQ(t.decode(t.encode("hello w\xC3\xA9\n", false, true)), "hello w\xC3\xA9\n");
  EXPECT_TRUE(t.is_end_of_generation(260));
}

TEST(TokenizerGguf, SpecialTokensLongestFirst) {
  auto b = build(gpt2_metadata());
  const Tokenizer& t = *b->tok;
  EXPECT_EQ(t.encode("<a><b>", false, true), (Ids{264}));
  EXPECT_EQ(t.encode("<a><c>", false, true), (Ids{263, '<', 'c', '>'}));
  EXPECT_EQ(t.encode("x<|im_start|>y", false, true), (Ids{'x', 261, 'y'}));
  EXPECT_EQ(t.encode("<think>", false, false), (Ids{262}));
  EXPECT_EQ(t.token_to_bytes(261), "");
  EXPECT_EQ(t.token_to_bytes(261, true), "<|im_start|>");
}

TEST(TokenizerGguf, ErrorsNameTheKey) {
  EXPECT_EQ(error_of(without(llama_metadata(), "tokenizer.ggml.model")),
            "mem.gguf: missing metadata key tokenizer.ggml.model");
  EXPECT_EQ(error_of(without(llama_metadata(), "tokenizer.ggml.tokens")),
            "mem.gguf: missing metadata key tokenizer.ggml.tokens");
  EXPECT_EQ(error_of(without(llama_metadata(), "tokenizer.ggml.scores")),
            "mem.gguf: missing metadata key tokenizer.ggml.scores");
  EXPECT_EQ(error_of(without(gpt2_metadata(), "tokenizer.ggml.merges")),
            "mem.gguf: missing metadata key tokenizer.ggml.merges");
  EXPECT_NE(error_of(with(llama_metadata(), "tokenizer.ggml.model", WValue::str("bert")))
                .find("unsupported tokenizer.ggml.model \"bert\""),
            std::string::npos);
  EXPECT_NE(error_of(with(gpt2_metadata(), "tokenizer.ggml.pre", WValue::str("tekken")))
                .find("unsupported tokenizer.ggml.pre \"tekken\""),
            std::string::npos);
  EXPECT_NE(error_of(with(llama_metadata(), "tokenizer.ggml.bos_token_id", WValue::u32(9999)))
                .find("tokenizer.ggml.bos_token_id = 9999 is outside the vocabulary"),
            std::string::npos);
  EXPECT_NE(error_of(with(llama_metadata(), "tokenizer.ggml.scores",
                          WValue::numbers(GgufValueType::F32, std::vector<float>{1, 2})))
                .find("tokenizer.ggml.scores has 2 entries but there are 267 tokens"),
            std::string::npos);
  EXPECT_NE(error_of(with(gpt2_metadata(), "tokenizer.ggml.merges", WValue::strings({"nospace"})))
                .find("tokenizer.ggml.merges[0]"),
            std::string::npos);
  EXPECT_NE(error_of(with(llama_metadata(), "tokenizer.ggml.tokens", WValue::str("x")))
                .find("tokenizer.ggml.tokens: expected ARRAY"),
            std::string::npos);
  EXPECT_NE(error_of(with(llama_metadata(), "tokenizer.ggml.tokens", WValue::strings({}))).find("is empty"),
            std::string::npos);
}

TEST(TokenizerGguf, RejectsUnknownTokenTypes) {
  Metadata m = gpt2_metadata();
  std::vector<int32_t> types(265, 1);
  types[7] = 9;
  m = with(m, "tokenizer.ggml.token_type", WValue::numbers(GgufValueType::I32, types));
  EXPECT_NE(error_of(m).find("tokenizer.ggml.token_type[7] = 9 is not a known token type"),
            std::string::npos);
}

}  // namespace
}  // namespace ts
