// libFuzzer target for the "llama" (SentencePiece BPE) tokenizer on the real stories260K
// vocabulary (env TS_FUZZ_MODEL, default ../shared/models/stories260K.gguf beside the repo).
// Any bytes must encode to in-range ids; plain text must round-trip through decode (byte fallback
// covers every byte), except text holding "▁", which SentencePiece cannot tell from a space; and
// the streaming decoder must give valid UTF-8 equal to the sanitized whole decode.
#include "tokenizer_fuzz.h"

namespace {

constexpr const char* kTarget = "fuzz_tokenizer_llama";

const fuzz::LoadedTokenizer* loaded() {
  static const std::unique_ptr<fuzz::LoadedTokenizer> l = fuzz::load_tokenizer(
      kTarget, "TS_FUZZ_MODEL",
      std::filesystem::path(__FILE__).parent_path() / "../../shared/models/stories260K.gguf");
  return l.get();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fuzz::LoadedTokenizer* l = loaded();
  if (!l) return 0;
  const ts::Tokenizer& tok = *l->tok;
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::check_encode_and_stream(kTarget, tok, text);

  if (text.find("\xE2\x96\x81") == std::string::npos) {
    fuzz::check(tok.decode(tok.encode(text, false, false)) == text, kTarget, "decode(encode(text)) != text");
  }
  return 0;
}
