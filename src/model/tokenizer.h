#pragma once
// Tokenizers built from GGUF metadata: "llama" (SentencePiece-style BPE by scores with byte
// fallback) and "gpt2" (byte-level BPE by merge rank, pre-tokenizer chosen by tokenizer.ggml.pre).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ts {

class GgufFile;

// Lets the vocabulary map be probed with a string_view without building a std::string.
struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

enum class TokenAttr : int32_t {  // tokenizer.ggml.token_type values
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Throws ts::Error naming the missing/invalid key or unsupported model/pre-tokenizer.
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& gguf);

  // Text -> ids. `add_bos`: prepend BOS. `parse_special`: control/user-defined token texts in
  // the input (e.g. "<|im_start|>") become their ids instead of being tokenized as plain text.
  // (User-defined texts become their ids even without it, as in HF tokenizers and llama.cpp.)
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const = 0;
  // The bytes a token stands for (byte tokens -> their byte, "▁"/byte-level mapping undone).
  // Control tokens decode to "" unless `render_special`.
  virtual std::string token_to_bytes(int32_t id, bool render_special = false) const = 0;
  std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const;

  int32_t n_vocab() const { return static_cast<int32_t>(texts_.size()); }
  const std::string& token_text(int32_t id) const { return texts_.at(static_cast<size_t>(id)); }
  TokenAttr attr(int32_t id) const { return attrs_.at(static_cast<size_t>(id)); }
  int32_t find(std::string_view text) const;  // -1 when absent
  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  bool add_bos_default() const { return add_bos_; }
  bool add_eos_default() const { return add_eos_; }  // tokenizer.ggml.add_eos_token
  // End of generation: EOS, EOT-like tokens (e.g. "<|im_end|>", "<|eot_id|>").
  bool is_end_of_generation(int32_t id) const;
  const std::string& model_name() const { return model_; }  // "llama" | "gpt2"
  const std::string& pre_name() const { return pre_; }

 protected:
  std::vector<std::string> texts_;
  std::vector<TokenAttr> attrs_;
  std::vector<int32_t> eog_ids_;
  int32_t bos_ = -1, eos_ = -1;
  bool add_bos_ = false;
  std::string model_, pre_;
  std::unordered_map<std::string, int32_t, TextHash, std::equal_to<>> ids_;  // text -> id, for find()
  bool add_eos_ = false;
  bool strip_leading_space_ = false;  // decode() drops the space a SentencePiece prefix added
};

// Turns a stream of token ids into text, holding back bytes of an incomplete UTF-8 sequence
// so streamed output never contains a split character.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tok) : tok_(tok) {}
  std::string push(int32_t id);  // complete UTF-8 text made available by this token
  std::string flush();           // whatever remains (invalid tails as U+FFFD)

 private:
  const Tokenizer& tok_;
  std::string pending_;
};

}  // namespace ts
