#pragma once
// Pre-tokenizers of byte-level BPE models: split text into the pieces BPE merges within, exactly
// as HF tokenizers' regex Split / Digits pre-tokenizers do, with hand-written matchers over code
// points instead of a regex engine.
#include <optional>
#include <string_view>
#include <vector>

namespace ts {

enum class PreTokenizer {
  Gpt2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  SmolLM,  // every \p{N} character on its own (HF Digits(individual_digits)), then Gpt2
  Llama3,  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
           // | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  Qwen2,   // Llama3 with \p{N} instead of \p{N}{1,3}
};

// The kind named by tokenizer.ggml.pre (an empty name means the GPT-2 default).
std::optional<PreTokenizer> pre_tokenizer_from_name(std::string_view name);

// Splits `text` into consecutive non-empty pieces that together are exactly `text`. Bytes that
// are not valid UTF-8 count as punctuation-like characters of their own.
std::vector<std::string_view> pre_tokenize(PreTokenizer kind, std::string_view text);

}  // namespace ts
