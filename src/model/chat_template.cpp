#include "model/chat_template.h"

#include <utility>

#include "core/error.h"
#include "model/gguf.h"

namespace ts {
namespace {

// Finds a literal default system message of the form '<|im_start|>system\n...<|im_end|>' written
// inside a Jinja string in the template (as SmolLM2's template does for a conversation without one).
std::string chatml_default_system(const std::string& tpl) {
  const std::string open = "<|im_start|>system\\n", close = "<|im_end|>";
  const size_t a = tpl.find(open);
  if (a == std::string::npos) return "";
  const size_t b = tpl.find(close, a + open.size());
  if (b == std::string::npos) return "";
  std::string text = tpl.substr(a + open.size(), b - a - open.size());
  // A Jinja expression (e.g. "+ message['content'] +") means it is not a literal default.
  if (text.find('\'') != std::string::npos || text.find('{') != std::string::npos) return "";
  return text;
}

// Jinja's `trim`: no leading or trailing whitespace.
std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\n\r"), b = s.find_last_not_of(" \t\n\r");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

}  // namespace

ChatTemplate ChatTemplate::from_gguf(const GgufFile& g) {
  const GgufValue* v = g.find("tokenizer.chat_template");
  ChatTemplate t;
  // Gemma 3 GGUFs often carry no template; their turns are known.
  if (!v && g.get_string("general.architecture", "") == "gemma3") {
    t.format = ChatFormat::Gemma;
    return t;
  }
  TS_CHECK(v, g.name(), ": no tokenizer.chat_template in this model; run without --chat");
  const std::string& tpl = v->as_string("tokenizer.chat_template");
  if (tpl.find("<start_of_turn>") != std::string::npos) {
    t.format = ChatFormat::Gemma;
  } else if (tpl.find("<|im_start|>") != std::string::npos) {
    t.format = ChatFormat::ChatML;
    t.default_system = chatml_default_system(tpl);
  } else if (tpl.find("<|start_header_id|>") != std::string::npos) {
    t.format = ChatFormat::Llama3;
  } else {
    fail(g.name(), ": unsupported chat template (supported: ChatML, Llama-3, Gemma)");
  }
  return t;
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  std::string out;
  if (format == ChatFormat::ChatML) {
    if (!default_system.empty() && (messages.empty() || messages.front().role != "system"))
      out += "<|im_start|>system\n" + default_system + "<|im_end|>\n";
    for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    if (add_generation_prompt) out += "<|im_start|>assistant\n";
  } else if (format == ChatFormat::Gemma) {
    // Gemma has no system turn: a system message opens the turn after it, whatever its role. The
    // assistant's role is "model"; contents are trimmed as Gemma's template does. BOS comes from
    // the tokenizer.
    std::string system;
    for (const ChatMessage& m : messages) {
      if (m.role == "system") {
        system += trim(m.content) + "\n\n";
        continue;
      }
      out += "<start_of_turn>" + std::string(m.role == "assistant" ? "model" : m.role) + "\n" +
             std::exchange(system, "") + trim(m.content) + "<end_of_turn>\n";
    }
    // A system message with no turn after it still reaches the model, as a user turn.
    if (!system.empty())
      out += "<start_of_turn>user\n" + system.substr(0, system.size() - 2) + "<end_of_turn>\n";
    if (add_generation_prompt) out += "<start_of_turn>model\n";
  } else {
    // <|begin_of_text|> is the BOS token, added by the tokenizer (add_bos_token), not here.
    for (const ChatMessage& m : messages)
      out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
    if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  }
  return out;
}

}  // namespace ts
