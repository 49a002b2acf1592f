#include "server/request_parse.h"

#include <limits>

#include "server/api_error.h"

namespace ts::server {
namespace {

using nlohmann::json;

// Reads a body's fields, remembering which were asked for so finish() can name the unknown ones.
class Fields {
 public:
  explicit Fields(const json& body) : body_(body) {
    if (!body.is_object()) bad_request("the request body must be a JSON object");
  }

  // The field's value, or null when absent or JSON null.
  const json* get(const std::string& key) {
    known_.push_back(key);
    const auto it = body_.find(key);
    return it == body_.end() || it->is_null() ? nullptr : &*it;
  }
  int64_t integer(const std::string& key, int64_t fallback, int64_t min, int64_t max) {
    const json* v = get(key);
    if (!v) return fallback;
    if (!v->is_number_integer()) bad_request("'", key, "' must be an integer");
    // An unsigned value above INT64_MAX would wrap if read as int64_t: compare it unsigned.
    const bool too_big = v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(max);
    const int64_t x = too_big ? max : v->get<int64_t>();
    if (too_big || x < min || x > max)
      bad_request("'", key, "' must be between ", min, " and ", max, " (got ", v->dump(), ")");
    return x;
  }
  double number(const std::string& key, double fallback, double min, double max) {
    const json* v = get(key);
    if (!v) return fallback;
    if (!v->is_number()) bad_request("'", key, "' must be a number");
    const double x = v->get<double>();
    if (!(x >= min && x <= max))
      bad_request("'", key, "' must be between ", min, " and ", max, " (got ", x, ")");
    return x;
  }
  bool boolean(const std::string& key, bool fallback) {
    const json* v = get(key);
    if (!v) return fallback;
    if (!v->is_boolean()) bad_request("'", key, "' must be true or false");
    return v->get<bool>();
  }
  // OpenAI options we accept only at their neutral value.
  void neutral_number(const std::string& key, double neutral) {
    if (number(key, neutral, -1e9, 1e9) != neutral)
      bad_request("'", key, "' is not supported (only ", neutral, ")");
  }
  void ignored(const std::string& key) { get(key); }
  void finish() const {
    for (const auto& [key, value] : body_.items()) {
      if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
      std::string names;
      for (const std::string& k : known_) names += (names.empty() ? "" : ", ") + k;
      bad_request("unknown field '", key, "' (known: ", names, ")");
    }
  }

 private:
  const json& body_;
  std::vector<std::string> known_;
};

// Fields common to completions and chat completions.
ParsedRequest common_fields(Fields& f, const ServerLimits& limits, int default_max_tokens) {
  ParsedRequest r;
  f.ignored("model");  // one model is served, whatever the client calls it
  f.ignored("user");
  f.ignored("stream_options");
  GenerationParams& p = r.params;
  p.max_tokens = static_cast<int>(f.integer("max_tokens", default_max_tokens, 0, limits.max_tokens));
  SamplerParams& s = p.sampling;
  s.temperature = static_cast<float>(f.number("temperature", 1.0, 0.0, 2.0));
  s.top_p = static_cast<float>(f.number("top_p", 1.0, 0.0, 1.0));
  s.top_k = static_cast<int>(f.integer("top_k", 0, 0, std::numeric_limits<int>::max()));
  s.min_p = static_cast<float>(f.number("min_p", 0.0, 0.0, 1.0));
  s.repeat_penalty = static_cast<float>(f.number("repeat_penalty", 1.0, 0.01, 100.0));
  s.seed = f.get("seed") ? static_cast<uint64_t>(f.integer("seed", 0, 0, std::numeric_limits<int64_t>::max()))
                         : std::random_device{}();
  f.integer("n", 1, 1, 1);
  f.neutral_number("frequency_penalty", 0.0);
  f.neutral_number("presence_penalty", 0.0);
  if (const json* bias = f.get("logit_bias"); bias && !(bias->is_object() && bias->empty()))
    bad_request("'logit_bias' is not supported");
  if (const json* stop = f.get("stop")) {
    if (stop->is_string()) {
      p.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array() && stop->size() <= limits.max_stops) {
      for (const json& s1 : *stop) {
        if (!s1.is_string()) bad_request("'stop' must be a string or a list of strings");
        p.stop.push_back(s1.get<std::string>());
      }
    } else {
      bad_request("'stop' must be a string or a list of at most ", limits.max_stops, " strings");
    }
    for (const std::string& s1 : p.stop)
      if (s1.empty()) bad_request("'stop' strings must not be empty");
  }
  r.stream = f.boolean("stream", false);
  p.ignore_eos = f.boolean("ignore_eos", false);
  if (const json* policy = f.get("policy")) r.policies = parse_policy_field(*policy);
  return r;
}

std::vector<int32_t> token_prompt(const json& ids, const Tokenizer& tok) {
  std::vector<int32_t> out;
  for (const json& id : ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= tok.n_vocab())
      bad_request("token ids in 'prompt' must be integers in [0, ", tok.n_vocab(), ")");
    out.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return out;
}

void check_prompt_length(const std::vector<int32_t>& prompt, const ServerLimits& limits, size_t n_ctx) {
  const size_t limit = limits.max_prompt_tokens ? std::min(limits.max_prompt_tokens, n_ctx) : n_ctx;
  if (prompt.empty()) bad_request("the prompt is empty (it encodes to no tokens)");
  if (prompt.size() > limit) bad_request("the prompt has ", prompt.size(), " tokens; the limit is ", limit);
}

std::string message_content(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string text;
  if (content.is_array()) {
    for (const json& part : content) {
      if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
          !part["text"].is_string())
        bad_request("message content parts must be {\"type\": \"text\", \"text\": ...}");
      text += part["text"].get<std::string>();
    }
    return text;
  }
  bad_request("message 'content' must be a string or a list of text parts");
}

}  // namespace

json parse_body(const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // a syntax error, or a number out of range (1e999)
    bad_request("malformed JSON body: ", e.what());
  }
}

std::vector<std::string> parse_policy_field(const json& value) {
  std::vector<std::string> specs;
  if (value.is_string()) {
    if (!value.get<std::string>().empty()) specs.push_back(value.get<std::string>());
    return specs;
  }
  if (!value.is_array()) bad_request("'policy' must be a policy spec or a list of them");
  for (const json& spec : value) {
    if (!spec.is_string() || spec.get<std::string>().empty())
      bad_request("'policy' must be a policy spec or a list of them");
    specs.push_back(spec.get<std::string>());
  }
  return specs;
}

ParsedRequest parse_completion(const json& body, const Tokenizer& tok, const ServerLimits& limits,
                               size_t n_ctx) {
  Fields f(body);
  ParsedRequest r = common_fields(f, limits, 16);
  GenerationParams& p = r.params;
  p.echo = f.boolean("echo", false);
  p.logprobs = static_cast<int>(f.integer("logprobs", -1, 0, limits.max_logprobs));
  f.integer("best_of", 1, 1, 1);
  if (const json* suffix = f.get("suffix"); suffix && !(suffix->is_string() && suffix->empty()))
    bad_request("'suffix' is not supported");
  const json* prompt = f.get("prompt");
  if (!prompt) bad_request("'prompt' is required");
  f.finish();

  // Echo gives a text prompt back as sent and a token prompt as its tokens' text.
  const auto text_prompt = [&](const json& s) {
    r.prompt_texts.push_back(s.get<std::string>());
    return tok.encode(s.get<std::string>(), tok.add_bos_default(), true);
  };
  const auto ids_prompt = [&](const json& ids) {
    std::vector<int32_t> out = token_prompt(ids, tok);
    r.prompt_texts.push_back(tok.decode(out, /*render_special=*/true));
    return out;
  };
  if (prompt->is_string()) {
    r.prompts.push_back(text_prompt(*prompt));
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number()) {
    r.prompts.push_back(ids_prompt(*prompt));
  } else if (prompt->is_array() && !prompt->empty()) {
    if (prompt->size() > limits.max_prompts)
      bad_request("'prompt' has ", prompt->size(), " prompts; the limit is ", limits.max_prompts);
    for (const json& one : *prompt) {
      if (one.is_string()) {
        r.prompts.push_back(text_prompt(one));
      } else if (one.is_array()) {
        r.prompts.push_back(ids_prompt(one));
      } else {
        bad_request("'prompt' must be a string, a list of strings, token ids or lists of token ids");
      }
    }
  } else {
    bad_request("'prompt' must be a string, a list of strings, token ids or lists of token ids");
  }
  for (const auto& one : r.prompts) check_prompt_length(one, limits, n_ctx);
  if (r.stream && r.prompts.size() > 1) bad_request("'stream' takes a single prompt");
  if (p.max_tokens == 0 && !p.echo) bad_request("'max_tokens' must be at least 1 unless 'echo' is true");
  return r;
}

ParsedRequest parse_chat(const json& body, const Tokenizer& tok, const ChatTemplate* chat,
                         const ServerLimits& limits, size_t n_ctx) {
  Fields f(body);
  const int max_completion =
      static_cast<int>(f.integer("max_completion_tokens", limits.max_tokens, 1, limits.max_tokens));
  ParsedRequest r = common_fields(f, limits, max_completion);
  if (r.params.max_tokens == 0) bad_request("'max_tokens' must be at least 1");
  if (f.boolean("logprobs", false))
    bad_request("'logprobs' is not supported on chat completions (use /v1/completions)");
  f.integer("top_logprobs", 0, 0, 0);
  const json* messages = f.get("messages");
  if (!messages) bad_request("'messages' is required");
  f.finish();
  if (!messages->is_array() || messages->empty()) bad_request("'messages' must be a non-empty list");
  std::vector<ChatMessage> conversation;
  for (const json& m : *messages) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content"))
      bad_request("each message needs a 'role' and a 'content'");
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant")
      bad_request("message role '", role, "' is not one of system, user, assistant");
    conversation.push_back({role, message_content(m["content"])});
  }
  if (!chat) bad_request("this model has no chat template; use /v1/completions");
  r.prompts.push_back(tok.encode(chat->render(conversation, true), tok.add_bos_default(), true));
  check_prompt_length(r.prompts[0], limits, n_ctx);
  return r;
}

}  // namespace ts::server
