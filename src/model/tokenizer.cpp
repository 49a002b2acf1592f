#include "model/tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "model/bpe_tokenizer.h"
#include "model/gguf.h"
#include "model/spm_tokenizer.h"
#include "model/unicode.h"

namespace ts {

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& gguf) {
  TokenizerData d = read_tokenizer_data(gguf);
  if (d.model == "llama") return std::make_unique<SpmTokenizer>(d);
  if (d.model == "gpt2") {
    const std::optional<PreTokenizer> pre = pre_tokenizer_from_name(d.pre);
    TS_CHECK(pre, gguf.name(), ": unsupported tokenizer.ggml.pre \"", d.pre,
             "\" (supported: default, gpt2, smollm, llama3, llama-v3, llama-bpe, qwen2, deepseek-r1-qwen)");
    return std::make_unique<BpeTokenizer>(d, *pre);
  }
  fail(gguf.name(), ": unsupported tokenizer.ggml.model \"", d.model, "\" (supported: llama, gpt2)");
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  std::string out;
  for (int32_t id : ids) out += token_to_bytes(id, render_special);
  if (strip_leading_space_ && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

int32_t Tokenizer::find(std::string_view text) const {
  auto it = ids_.find(text);
  return it == ids_.end() ? -1 : it->second;
}

bool Tokenizer::is_end_of_generation(int32_t id) const {
  return std::find(eog_ids_.begin(), eog_ids_.end(), id) != eog_ids_.end();
}

std::string StreamingDecoder::push(int32_t id) {
  pending_ += tok_.token_to_bytes(id);
  const size_t keep = unicode::incomplete_tail(pending_);
  std::string out = unicode::sanitize(std::string_view(pending_).substr(0, pending_.size() - keep));
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string StreamingDecoder::flush() {
  std::string out = unicode::sanitize(pending_);
  pending_.clear();
  return out;
}

}  // namespace ts
