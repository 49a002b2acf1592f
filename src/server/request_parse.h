#pragma once
// The OpenAI request bodies (plus our extensions) read into generation jobs, with every field
// checked: a wrong type, an out-of-range value, an unknown field or an unsupported option is an
// ApiError 400 naming the field.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/chat_template.h"
#include "model/tokenizer.h"
#include "server/job.h"

namespace ts::server {

struct ServerLimits {
  size_t max_body_bytes = 1 << 20;
  size_t max_prompt_tokens = 0;  // 0: the context size
  int max_tokens = 2048;
  size_t max_prompts = 64;  // prompts in one completion request
  int max_logprobs = 20;
  size_t max_stops = 4;
};

struct ParsedRequest {
  std::vector<std::vector<int32_t>> prompts;  // chat: one, the rendered conversation
  std::vector<std::string> prompt_texts;      // completions: each prompt as text, for echo
  GenerationParams params;
  std::optional<std::vector<std::string>> policies;  // none: the server's default
  bool stream = false;
};

// Parses the body text; malformed JSON is an ApiError 400.
nlohmann::json parse_body(const std::string& text);

ParsedRequest parse_completion(const nlohmann::json& body, const Tokenizer& tok, const ServerLimits& limits,
                               size_t n_ctx);
// chat: the model's template, or null when it has none (then the request is refused).
ParsedRequest parse_chat(const nlohmann::json& body, const Tokenizer& tok, const ChatTemplate* chat,
                         const ServerLimits& limits, size_t n_ctx);

// The `policy` field: a spec "NAME[:KEY=VALUE,...]" or a list of them, applied in order; "" or []:
// dense.
std::vector<std::string> parse_policy_field(const nlohmann::json& value);

}  // namespace ts::server
