// Chat formats rendered natively: Gemma's turns as its template writes them (Gemma 3's model
// card and tokenizer_config.json): no system turn, the system text opening the first user turn,
// "model" for the assistant, contents trimmed.
#include <gtest/gtest.h>

#include <filesystem>

#include "model/chat_template.h"
#include "model/gguf.h"
#include "test_paths.h"

namespace ts {
namespace {

TEST(ChatTemplate, GemmaTurns) {
  ChatTemplate gemma;
  gemma.format = ChatFormat::Gemma;
  EXPECT_EQ(gemma.render(
                {{"system", "Be brief. "}, {"user", " Hi\n"}, {"assistant", "Hello"}, {"user", "Bye"}}, true),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(gemma.render({{"user", "Hi"}}, false), "<start_of_turn>user\nHi<end_of_turn>\n");
  // A system message is never dropped: it opens the next turn whatever its role, or becomes one.
  EXPECT_EQ(gemma.render({{"system", "Be brief."}, {"assistant", "Hello"}}, false),
            "<start_of_turn>model\nBe brief.\n\nHello<end_of_turn>\n");
  EXPECT_EQ(gemma.render({{"system", "Be brief."}}, true),
            "<start_of_turn>user\nBe brief.<end_of_turn>\n<start_of_turn>model\n");
}

// Gemma 3 GGUFs may carry no template (the 270M one does not): their format is known.
TEST(ChatTemplate, GemmaFileWithoutTemplateIsGemma) {
  const std::string path = source_path("models/gemma-3-270m-Q4_K_M.gguf");
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << "gemma-3-270m-Q4_K_M.gguf not present (tools/fetch_model.sh)";
  const auto gguf = GgufFile::open(path);
  ASSERT_EQ(gguf->find("tokenizer.chat_template"), nullptr);
  EXPECT_EQ(ChatTemplate::from_gguf(*gguf).format, ChatFormat::Gemma);
}

}  // namespace
}  // namespace ts
