#include "server/openai_format.h"

namespace ts::server {
namespace {

using nlohmann::json;

json finish_or_null(const std::string& reason) { return reason.empty() ? json(nullptr) : json(reason); }

json usage(size_t prompt_tokens, size_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

}  // namespace

json completion_logprobs(const std::vector<TokenLogprob>& tokens, const Tokenizer& tok, size_t& offset) {
  json texts = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprob& t : tokens) {
    const std::string text = tok.token_to_bytes(t.id, true);
    texts.push_back(text);
    offsets.push_back(offset);
    offset += text.size();
    lps.push_back(t.logprob ? json(*t.logprob) : json(nullptr));
    if (!t.logprob) {
      tops.push_back(nullptr);
      continue;
    }
    json top = json::object();
    for (const auto& [id, lp] : t.top)
      top.emplace(tok.token_to_bytes(id, true), lp);  // first (likeliest) wins
    tops.push_back(std::move(top));
  }
  return {{"tokens", texts}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json completion_choice(size_t index, const std::string& text, json logprobs,
                       const std::string& finish_reason) {
  return {{"index", index},
          {"text", text},
          {"logprobs", std::move(logprobs)},
          {"finish_reason", finish_or_null(finish_reason)}};
}

json completion_body(const ResponseHeader& h, json choices, size_t prompt_tokens, size_t completion_tokens) {
  return {{"id", h.id},
          {"object", "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", std::move(choices)},
          {"usage", usage(prompt_tokens, completion_tokens)}};
}

json completion_chunk(const ResponseHeader& h, const std::string& text, json logprobs,
                      const std::string& finish_reason) {
  return {{"id", h.id},
          {"object", "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", json::array({completion_choice(0, text, std::move(logprobs), finish_reason)})}};
}

json chat_body(const ResponseHeader& h, const std::string& content, const std::string& finish_reason,
               size_t prompt_tokens, size_t completion_tokens) {
  json choice = {{"index", 0},
                 {"message", {{"role", "assistant"}, {"content", content}}},
                 {"logprobs", nullptr},
                 {"finish_reason", finish_or_null(finish_reason)}};
  return {{"id", h.id},
          {"object", "chat.completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", json::array({std::move(choice)})},
          {"usage", usage(prompt_tokens, completion_tokens)}};
}

json chat_chunk(const ResponseHeader& h, json delta, const std::string& finish_reason) {
  json choice = {{"index", 0},
                 {"delta", std::move(delta)},
                 {"logprobs", nullptr},
                 {"finish_reason", finish_or_null(finish_reason)}};
  return {{"id", h.id},
          {"object", "chat.completion.chunk"},
          {"created", h.created},
          {"model", h.model},
          {"choices", json::array({std::move(choice)})}};
}

}  // namespace ts::server
