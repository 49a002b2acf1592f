#pragma once
// Chat prompt formatting for the template families our GGUFs carry in tokenizer.chat_template.
// The Jinja source is not executed: its family is recognised and rendered natively.
#include <string>
#include <vector>

namespace ts {

class GgufFile;

struct ChatMessage {
  std::string role;  // "system" | "user" | "assistant"
  std::string content;
};

enum class ChatFormat { ChatML, Llama3, Gemma };

struct ChatTemplate {
  ChatFormat format = ChatFormat::ChatML;
  // System prompt the template inserts when the conversation has none (SmolLM2 does this).
  std::string default_system;

  // Throws ts::Error when the GGUF has no template (but for Gemma 3, whose format is known) or one
  // we do not recognise.
  static ChatTemplate from_gguf(const GgufFile& gguf);
  // Text to tokenize with special-token parsing on; ends with the assistant header if asked.
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
};

}  // namespace ts
