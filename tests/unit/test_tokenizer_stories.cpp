// The "llama" (SentencePiece BPE) tokenizer on the real stories260K vocabulary. Expected ids come
// from HF tokenizers 0.23.3 via tools/hf_tokenizer_from_gguf.py on the same file.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "model/tokenizer.h"
#include "test_paths.h"
#include "tokenizer_file_fixture.h"

namespace ts {
namespace {

const std::string kModel = shared_path("models/stories260K.gguf");

using TokenizerStories = TokenizerFileTest<kModel>;

using Ids = std::vector<int32_t>;

TEST_F(TokenizerStories, Metadata) {
  EXPECT_EQ(tok().model_name(), "llama");
  EXPECT_EQ(tok().n_vocab(), 512);
  EXPECT_EQ(tok().bos(), 1);
  EXPECT_EQ(tok().eos(), 2);
  EXPECT_TRUE(tok().add_bos_default());  // no add_bos_token key: SentencePiece default
  EXPECT_FALSE(tok().add_eos_default());
  EXPECT_TRUE(tok().is_end_of_generation(2));
  EXPECT_FALSE(tok().is_end_of_generation(1));
  EXPECT_EQ(tok().attr(0), TokenAttr::Unknown);
  EXPECT_EQ(tok().attr(3), TokenAttr::Byte);
  EXPECT_EQ(tok().find("▁Once"), 403);
  EXPECT_EQ(tok().find("no such token"), -1);
}

TEST_F(TokenizerStories, EncodesLikeHf) {
  EXPECT_EQ(tok().encode("Once upon a time, there was a little girl named Lily.", true, true),
            (Ids{1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426}));
  EXPECT_EQ(tok().encode("Hello world", true, true), (Ids{1, 346, 306, 414, 263, 304, 341}));
  EXPECT_EQ(tok().encode(" leading space", true, true),
            (Ids{1, 410, 278, 411, 380, 299, 262, 427, 412, 331}));
  // é is in the vocabulary, the emoji is not: it falls back to its four byte tokens.
  EXPECT_EQ(tok().encode("été 😀!", true, true), (Ids{1, 410, 485, 413, 485, 410, 243, 162, 155, 131, 443}));
  EXPECT_EQ(tok().encode("a\nb", true, true), (Ids{1, 261, 13, 430}));
  EXPECT_EQ(tok().encode("", true, true), (Ids{1}));
  EXPECT_EQ(tok().encode("", false, true), (Ids{}));
}

TEST_F(TokenizerStories, SpecialTokensOnlyWhenParsed) {
  // After a special token the text gets its own "▁" prefix, as in HF and llama.cpp.
  EXPECT_EQ(tok().encode("<s>x</s>", true, true), (Ids{1, 1, 410, 444, 2}));
  EXPECT_EQ(tok().encode("<s>x</s>", false, false), (Ids{410, 504, 419, 505, 444, 504, 492, 419, 505}));
}

TEST_F(TokenizerStories, DecodesAndDropsThePrefixSpace) {
  const Ids ids = tok().encode("Once upon a time", true, true);
  EXPECT_EQ(tok().decode(ids), "Once upon a time");
  EXPECT_EQ(tok().decode(ids, true), "<s> Once upon a time");
  EXPECT_EQ(tok().token_to_bytes(403), " Once");
  EXPECT_EQ(tok().token_to_bytes(13), "\n");
  EXPECT_EQ(tok().token_to_bytes(1), "");
  EXPECT_EQ(tok().token_to_bytes(1, true), "<s>");
  EXPECT_THROW(tok().token_to_bytes(512), Error);
  EXPECT_THROW(tok().token_to_bytes(-1), Error);
}

TEST_F(TokenizerStories, RoundTrips) {
  // "▁" itself is excluded: SentencePiece text cannot tell it from a space.
  const std::string texts[] = {"x",
                               " ",
                               "  two  spaces  ",
                               "\t\ttabs\r\n",
                               "Ünïcödé ñ 中文 😀🇺🇸",
                               "e\u0301",
                               "<s>",
                               "<|im_start|>",
                               "12345.678",
                               "\xFF\xFE invalid \xC3",
                               "\x01\x02\x7F",
                               "Tom's dog didn't bark!",
                               std::string(200, 'a'),
                               "\n\n\n"};
  for (const std::string& t : texts) EXPECT_EQ(tok().decode(tok().encode(t, false, false)), t) << t;
}

TEST_F(TokenizerStories, RoundTripsWikiText) {
  const std::string path = shared_path("data/wikitext2/wiki.test.raw");
  std::ifstream f(path, std::ios::binary);
  if (!f) GTEST_SKIP() << path << " not found";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  EXPECT_EQ(tok().decode(tok().encode(text, true, true)), text);
}

TEST_F(TokenizerStories, StreamingHoldsBackSplitCharacters) {
  const Ids ids = tok().encode("a😀b", false, false);  // ▁a, four byte tokens, b
  ASSERT_EQ(ids.size(), 6u);
  StreamingDecoder dec(tok());
  EXPECT_EQ(dec.push(ids[0]), " a");
  EXPECT_EQ(dec.push(ids[1]), "");
  EXPECT_EQ(dec.push(ids[2]), "");
  EXPECT_EQ(dec.push(ids[3]), "");
  EXPECT_EQ(dec.push(ids[4]), "😀");
  EXPECT_EQ(dec.push(ids[5]), "b");
  EXPECT_EQ(dec.flush(), "");
}

TEST_F(TokenizerStories, StreamingFlushesAndReplacesBrokenSequences) {
  const int32_t e2 = tok().find("<0xE2>"), x82 = tok().find("<0x82>"), ff = tok().find("<0xFF>");
  StreamingDecoder dec(tok());
  EXPECT_EQ(dec.push(e2), "");
  EXPECT_EQ(dec.push(x82), "");
  EXPECT_EQ(dec.flush(), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(dec.push(e2), "");
  EXPECT_EQ(dec.push(tok().find("x")), "\xEF\xBF\xBDx");  // the sequence can no longer complete
  EXPECT_EQ(dec.push(ff), "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace ts
