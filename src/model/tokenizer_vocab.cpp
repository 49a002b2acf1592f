#include "model/tokenizer_vocab.h"

#include "core/error.h"

namespace ts {
namespace {

// Token texts that end a turn in the chat formats we know, besides the declared EOS/EOT ids.
constexpr std::string_view kEndOfTurnTexts[] = {"<|im_end|>", "<|eot_id|>", "<|endoftext|>",
                                                "<|eom_id|>", "<|end|>",    "<end_of_turn>"};

bool renders_only_on_request(TokenAttr a) {
  return a == TokenAttr::Control || a == TokenAttr::Unknown || a == TokenAttr::Unused;
}

}  // namespace

VocabTokenizer::VocabTokenizer(TokenizerData& d) {
  texts_ = std::move(d.tokens);
  attrs_ = std::move(d.attrs);
  model_ = d.model;
  pre_ = d.pre;
  bos_ = d.bos;
  eos_ = d.eos;
  unk_ = d.unk;
  add_bos_ = d.add_bos;
  add_eos_ = d.add_eos;
  ids_.reserve(texts_.size());
  for (size_t i = 0; i < texts_.size(); ++i) ids_.insert_or_assign(texts_[i], static_cast<int32_t>(i));

  for (int32_t id : {d.eos, d.eot, d.eom}) {
    if (id >= 0) eog_ids_.push_back(id);
  }
  for (std::string_view text : kEndOfTurnTexts) {
    if (int32_t id = find(text); id >= 0) eog_ids_.push_back(id);
  }

  // Control and unknown tokens are matched in the input only when asked (parse_special);
  // user-defined ones always, as llama.cpp and HF tokenizers (non-special added tokens) do.
  for (size_t i = 0; i < texts_.size(); ++i) {
    const TokenAttr a = attrs_[i];
    if (a == TokenAttr::Control || a == TokenAttr::Unknown || a == TokenAttr::UserDefined) {
      specials_.add(texts_[i], static_cast<int32_t>(i), a != TokenAttr::UserDefined);
    }
  }
}

std::vector<int32_t> VocabTokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_bos && bos_ >= 0) out.push_back(bos_);
  size_t start = 0;  // first byte not yet tokenized
  for (size_t pos = 0; pos < text.size();) {
    const std::optional<SpecialMatcher::Match> m = specials_.match_at(text, pos);
    if (!m) {
      ++pos;
      continue;
    }
    // A special token's text that is not parsed stays plain text, yet still hides any shorter
    // added token inside it, as in HF tokenizers.
    if (m->special && !parse_special) {
      pos += m->len;
      continue;
    }
    if (pos > start) encode_text(text.substr(start, pos - start), out);
    out.push_back(m->id);
    pos += m->len;
    start = pos;
  }
  if (start < text.size()) encode_text(text.substr(start), out);
  return out;
}

std::string VocabTokenizer::token_to_bytes(int32_t id, bool render_special) const {
  TS_CHECK(id >= 0 && id < n_vocab(), "token id ", id, " is outside the vocabulary of ", n_vocab(),
           " tokens");
  const auto i = static_cast<size_t>(id);
  if (renders_only_on_request(attrs_[i])) return render_special ? texts_[i] : std::string();
  return pieces_[i];
}

}  // namespace ts
