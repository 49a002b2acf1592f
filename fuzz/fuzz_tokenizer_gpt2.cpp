// libFuzzer target for the "gpt2" (byte-level BPE) tokenizer on the real SmolLM2 vocabulary (env
// TS_FUZZ_GPT2_MODEL, default models/SmolLM2-135M-Instruct.Q4_1.gguf in the repo). Any bytes must
// encode to in-range ids; plain text must round-trip through decode, less the few bytes the
// vocabulary has no spelling for (dropped, as HF does); and the streaming decoder must give valid
// UTF-8 equal to the sanitized whole decode.
#include <array>

#include "tokenizer_fuzz.h"

namespace {

constexpr const char* kTarget = "fuzz_tokenizer_gpt2";

struct Vocabulary {
  std::unique_ptr<fuzz::LoadedTokenizer> loaded;
  std::array<bool, 256> spelled{};  // bytes the vocabulary can represent
};

const Vocabulary& vocabulary() {
  static const Vocabulary vocab = [] {
    Vocabulary v;
    v.loaded = fuzz::load_tokenizer(
        kTarget, "TS_FUZZ_GPT2_MODEL",
        std::filesystem::path(__FILE__).parent_path() / "../models/SmolLM2-135M-Instruct.Q4_1.gguf");
    for (int b = 0; v.loaded && b < 256; ++b)
      v.spelled[b] = !v.loaded->tok->encode(std::string(1, char(b)), false, false).empty();
    return v;
  }();
  return vocab;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Vocabulary& vocab = vocabulary();
  if (!vocab.loaded) return 0;
  const ts::Tokenizer& tok = *vocab.loaded->tok;
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::check_encode_and_stream(kTarget, tok, text);

  std::string representable;
  for (char c : text) {
    if (vocab.spelled[static_cast<uint8_t>(c)]) representable += c;
  }
  fuzz::check(tok.decode(tok.encode(text, false, false)) == representable, kTarget,
              "decode(encode(text)) != text");
  return 0;
}
