// The "gpt2" (byte-level BPE, smollm pre-tokenizer) tokenizer on the real SmolLM2 vocabulary,
// when the model file is present (models/ is not in git). Expected ids come from HF tokenizers
// 0.23.3 via tools/hf_tokenizer_from_gguf.py on the same file.
#include <gtest/gtest.h>

#include "model/tokenizer.h"
#include "test_paths.h"
#include "tokenizer_file_fixture.h"

namespace ts {
namespace {

const std::string kModel = source_path("models/SmolLM2-135M-Instruct.Q4_1.gguf");

using TokenizerSmolLM = TokenizerFileTest<kModel>;

using Ids = std::vector<int32_t>;

TEST_F(TokenizerSmolLM, Metadata) {
  EXPECT_EQ(tok().model_name(), "gpt2");
  EXPECT_EQ(tok().pre_name(), "smollm");
  EXPECT_FALSE(tok().add_bos_default());
  EXPECT_TRUE(tok().is_end_of_generation(2));  // eos = <|im_end|>
  EXPECT_TRUE(tok().is_end_of_generation(0));  // <|endoftext|>
  EXPECT_FALSE(tok().is_end_of_generation(1));
}

TEST_F(TokenizerSmolLM, EncodesLikeHf) {
  EXPECT_EQ(tok().encode("Hello world! It's 2024.", false, true),
            (Ids{19556, 905, 17, 657, 506, 216, 34, 32, 34, 36, 30}));
  EXPECT_EQ(tok().encode("<|im_start|>user\nWhat is 2+2?<|im_end|>\n", false, true),
            (Ids{1, 4093, 198, 1780, 314, 216, 34, 27, 34, 47, 2, 198}));
  EXPECT_EQ(tok().encode("中文 😀", false, true), (Ids{28589, 29184, 40303, 218}));
  EXPECT_EQ(tok().encode("  x\n\n", false, true), (Ids{216, 1792, 1116}));
  EXPECT_EQ(tok().encode("<|im_start|>", false, false), (Ids{44, 108, 306, 79, 3738, 108, 46}));
}

TEST_F(TokenizerSmolLM, DecodesByteLevelTokens) {
  EXPECT_EQ(tok().token_to_bytes(905), " world");
  EXPECT_EQ(tok().token_to_bytes(1116), "\n\n");
  EXPECT_EQ(tok().token_to_bytes(1), "");
  EXPECT_EQ(tok().token_to_bytes(1, true), "<|im_start|>");
  const Ids ids = tok().encode("<|im_start|>user\nHi<|im_end|>", false, true);
  EXPECT_EQ(tok().decode(ids), "user\nHi");
  EXPECT_EQ(tok().decode(ids, true), "<|im_start|>user\nHi<|im_end|>");
}

TEST_F(TokenizerSmolLM, RoundTrips) {
  const std::string texts[] = {"",
                               " ",
                               "  x  ",
                               "\t\r\n",
                               "Ünïcödé ñ 中文 😀🇺🇸 e\u0301",
                               "▁marked",
                               "<|im_start|>",
                               "3.14159 1,000",
                               "Tom's dog didn't bark!",
                               "\x80\xC3 invalid \xE2"};
  for (const std::string& t : texts) EXPECT_EQ(tok().decode(tok().encode(t, false, false)), t) << t;
}

TEST_F(TokenizerSmolLM, DropsBytesTheVocabularyCannotSpell) {
  // 0xFF has no byte-level token in this vocabulary; HF (BPE without unk) drops it too.
  EXPECT_EQ(tok().encode("\xFF\xFE", false, false), Ids{});
}

TEST_F(TokenizerSmolLM, StreamingJoinsACharacterSplitAcrossTokens) {
  const Ids ids = tok().encode(" 😀", false, false);  // "Ġð\x9f\x98" + "\x80"
  ASSERT_EQ(ids, (Ids{40303, 218}));
  StreamingDecoder dec(tok());
  EXPECT_EQ(dec.push(ids[0]), " ");
  EXPECT_EQ(dec.push(ids[1]), "😀");
  EXPECT_EQ(dec.flush(), "");
}

}  // namespace
}  // namespace ts
