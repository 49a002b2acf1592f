#pragma once
// Response bodies in the OpenAI wire format: completions, chat completions, and their
// server-sent-event chunks.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/tokenizer.h"
#include "server/logprobs.h"

namespace ts::server {

// What every response of one request carries.
struct ResponseHeader {
  std::string id;
  int64_t created = 0;  // Unix seconds
  std::string model;
};

// Completions' `logprobs` object {tokens, token_logprobs, top_logprobs, text_offset} for these tokens;
// text_offset counts on from `offset` (advanced past them), as in the returned text.
nlohmann::json completion_logprobs(const std::vector<TokenLogprob>& tokens, const Tokenizer& tok,
                                   size_t& offset);

nlohmann::json completion_choice(size_t index, const std::string& text, nlohmann::json logprobs,
                                 const std::string& finish_reason);
nlohmann::json completion_body(const ResponseHeader& h, nlohmann::json choices, size_t prompt_tokens,
                               size_t completion_tokens);
nlohmann::json completion_chunk(const ResponseHeader& h, const std::string& text, nlohmann::json logprobs,
                                const std::string& finish_reason);

nlohmann::json chat_body(const ResponseHeader& h, const std::string& content,
                         const std::string& finish_reason, size_t prompt_tokens, size_t completion_tokens);
// delta: {"role": ...} or {"content": ...} or {} with the finish reason.
nlohmann::json chat_chunk(const ResponseHeader& h, nlohmann::json delta, const std::string& finish_reason);

}  // namespace ts::server
