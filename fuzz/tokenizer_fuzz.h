#pragma once
// What the two tokenizer fuzz targets share: loading a real vocabulary once (a missing file
// turns the target into a no-op with one message, so the fuzz stage still runs without it), and
// the checks every tokenizer must pass on any bytes: ids in range, and the streaming decoder
// giving valid UTF-8 equal to the sanitized whole decode.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "model/gguf.h"
#include "model/tokenizer.h"
#include "model/unicode.h"

namespace fuzz {

struct LoadedTokenizer {
  std::unique_ptr<ts::GgufFile> gguf;
  std::unique_ptr<ts::Tokenizer> tok;
};

// The model at $env_var, else default_path; nullptr when it does not exist.
inline std::unique_ptr<LoadedTokenizer> load_tokenizer(const char* target, const char* env_var,
                                                       const std::filesystem::path& default_path) {
  const char* env = std::getenv(env_var);
  const std::string path = env ? env : default_path.string();
  if (!std::filesystem::exists(path)) {
    std::fprintf(stderr, "%s: %s not found; nothing to fuzz\n", target, path.c_str());
    return nullptr;
  }
  auto loaded = std::make_unique<LoadedTokenizer>();
  loaded->gguf = ts::GgufFile::open(path);
  loaded->tok = ts::Tokenizer::from_gguf(*loaded->gguf);
  return loaded;
}

inline void check(bool ok, const char* target, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "%s: %s\n", target, what);
  std::abort();
}

// Encodes text with special tokens parsed, checks ids and streaming decode; returns the ids.
inline std::vector<int32_t> check_encode_and_stream(const char* target, const ts::Tokenizer& tok,
                                                    const std::string& text) {
  const std::vector<int32_t> ids = tok.encode(text, true, true);
  std::string bytes, streamed;
  ts::StreamingDecoder stream(tok);
  for (int32_t id : ids) {
    check(id >= 0 && id < tok.n_vocab(), target, "id out of range");
    bytes += tok.token_to_bytes(id);
    streamed += stream.push(id);
  }
  streamed += stream.flush();
  check(streamed == ts::unicode::sanitize(bytes), target, "streamed text differs from the sanitized decode");
  tok.decode(ids, true);
  return ids;
}

}  // namespace fuzz
