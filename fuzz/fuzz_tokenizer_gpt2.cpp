// libFuzzer target for the "gpt2" (byte-level BPE) tokenizer on the real SmolLM2 vocabulary (env
// TS_FUZZ_GPT2_MODEL, default models/SmolLM2-135M-Instruct.Q4_1.gguf in the repo). Any bytes must
// encode to in-range ids; plain text must round-trip through decode, less the few bytes the
// vocabulary has no spelling for (dropped, as HF does); and the streaming decoder must give valid
// UTF-8 equal to the sanitized whole decode.
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "model/gguf.h"
#include "model/tokenizer.h"
#include "model/unicode.h"

namespace {

struct Loaded {
  std::unique_ptr<ts::GgufFile> gguf;
  std::unique_ptr<ts::Tokenizer> tok;
  std::array<bool, 256> spelled{};  // bytes the vocabulary can represent
};

const Loaded* load() {
  static const Loaded* loaded = []() -> const Loaded* {
    const char* env = std::getenv("TS_FUZZ_GPT2_MODEL");
    const std::string path =
        env ? env
            : (std::filesystem::path(__FILE__).parent_path() / "../models/SmolLM2-135M-Instruct.Q4_1.gguf")
                  .string();
    if (!std::filesystem::exists(path)) {
      std::fprintf(stderr, "fuzz_tokenizer_gpt2: %s not found; nothing to fuzz\n", path.c_str());
      return nullptr;
    }
    auto* l = new Loaded;
    l->gguf = ts::GgufFile::open(path);
    l->tok = ts::Tokenizer::from_gguf(*l->gguf);
    for (int b = 0; b < 256; ++b)
      l->spelled[b] = !l->tok->encode(std::string(1, char(b)), false, false).empty();
    return l;
  }();
  return loaded;
}

void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_tokenizer_gpt2: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Loaded* l = load();
  if (!l) return 0;
  const ts::Tokenizer& tok = *l->tok;
  const std::string text(reinterpret_cast<const char*>(data), size);

  const std::vector<int32_t> ids = tok.encode(text, true, true);
  std::string bytes;
  ts::StreamingDecoder stream(tok);
  std::string streamed;
  for (int32_t id : ids) {
    check(id >= 0 && id < tok.n_vocab(), "id out of range");
    bytes += tok.token_to_bytes(id);
    streamed += stream.push(id);
  }
  streamed += stream.flush();
  check(streamed == ts::unicode::sanitize(bytes), "streamed text differs from the sanitized decode");
  tok.decode(ids, true);

  std::string representable;
  for (char c : text) {
    if (l->spelled[static_cast<uint8_t>(c)]) representable += c;
  }
  check(tok.decode(tok.encode(text, false, false)) == representable, "decode(encode(text)) != text");
  return 0;
}
