// libFuzzer target for the server's OpenAI request parser (src/server/request_parse): any body
// must give a request or an ApiError with a 4xx status, as a client would see it. A 5xx, any other
// exception, a crash or a sanitizer report is a bug. The tokenizer and chat template are the real
// SmolLM2 ones ($TS_FUZZ_GPT2_MODEL), else stories260K's ($TS_FUZZ_MODEL).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "model/chat_template.h"
#include "server/api_error.h"
#include "server/request_parse.h"
#include "tokenizer_fuzz.h"

namespace {

struct Context {
  std::unique_ptr<fuzz::LoadedTokenizer> loaded;
  std::optional<ts::ChatTemplate> chat;
};

const Context& context() {
  static const Context c = [] {
    Context c;
    c.loaded = fuzz::load_tokenizer(
        "fuzz_request", "TS_FUZZ_GPT2_MODEL",
        std::filesystem::path(__FILE__).parent_path() / "../models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if (!c.loaded)
      c.loaded = fuzz::load_tokenizer(
          "fuzz_request", "TS_FUZZ_MODEL",
          std::filesystem::path(__FILE__).parent_path() / "../../shared/models/stories260K.gguf");
    if (c.loaded) {
      try {
        c.chat = ts::ChatTemplate::from_gguf(*c.loaded->gguf);
      } catch (const ts::Error&) {  // no template: chat requests are refused, which is fuzzed too
      }
    }
    return c;
  }();
  return c;
}

template <typename F>
void expect_4xx(F f) {
  try {
    f();
  } catch (const ts::server::ApiError& e) {
    if (e.status() < 400 || e.status() >= 500) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Context& c = context();
  if (!c.loaded) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const ts::server::ServerLimits limits;
  expect_4xx([&] {
    const nlohmann::json body = ts::server::parse_body(text);
    expect_4xx([&] { ts::server::parse_completion(body, *c.loaded->tok, limits, 2048); });
    expect_4xx(
        [&] { ts::server::parse_chat(body, *c.loaded->tok, c.chat ? &*c.chat : nullptr, limits, 2048); });
    if (body.is_object() && body.contains("policy"))
      expect_4xx([&] { ts::server::parse_policy_field(body["policy"]); });
  });
  return 0;
}
