#include "model/tokenizer_data.h"

#include <limits>

#include "core/error.h"
#include "model/gguf.h"

namespace ts {
namespace {

constexpr std::string_view kPrefix = "tokenizer.ggml.";

std::string key(std::string_view name) { return cat(kPrefix, name); }

const GgufArray* find_array(const GgufFile& g, std::string_view name, size_t n_expected) {
  const std::string k = key(name);
  const GgufValue* v = g.find(k);
  if (!v) return nullptr;
  const GgufArray& a = v->as_array(cat(g.name(), ": ", k));
  TS_CHECK(n_expected == 0 || a.size() == n_expected, g.name(), ": ", k, " has ", a.size(),
           " entries but there are ", n_expected, " tokens");
  return &a;
}

std::vector<std::string> read_strings(const GgufFile& g, const GgufArray& a, std::string_view name) {
  const std::string what = cat(g.name(), ": ", key(name));
  std::vector<std::string> out;
  out.reserve(a.size());
  for (const GgufValue& v : a) out.push_back(v.as_string(what));
  return out;
}

// Special token ids are stored unsigned; all-ones (and negatives) mean "none".
int32_t read_id(const GgufFile& g, std::string_view name, size_t n_vocab) {
  const std::string k = key(name);
  const GgufValue* v = g.find(k);
  if (!v) return -1;
  const int64_t id = v->as_i64(cat(g.name(), ": ", k));
  if (id < 0 || id == std::numeric_limits<uint32_t>::max()) return -1;
  TS_CHECK(static_cast<uint64_t>(id) < n_vocab, g.name(), ": ", k, " = ", id,
           " is outside the vocabulary of ", n_vocab, " tokens");
  return static_cast<int32_t>(id);
}

}  // namespace

TokenizerData read_tokenizer_data(const GgufFile& g) {
  TokenizerData d;
  d.name = g.name();
  d.model = g.require(key("model")).as_string(cat(g.name(), ": ", key("model")));
  d.pre = g.get_string(key("pre"), "");

  const GgufArray& tokens = g.require(key("tokens")).as_array(cat(g.name(), ": ", key("tokens")));
  TS_CHECK(!tokens.empty(), g.name(), ": ", key("tokens"), " is empty");
  TS_CHECK(tokens.size() < static_cast<size_t>(std::numeric_limits<int32_t>::max()), g.name(), ": ",
           key("tokens"), " has too many entries (", tokens.size(), ")");
  d.tokens = read_strings(g, tokens, "tokens");
  const size_t n = d.tokens.size();

  if (const GgufArray* scores = find_array(g, "scores", n)) {
    const std::string what = cat(g.name(), ": ", key("scores"));
    d.scores.reserve(n);
    for (const GgufValue& v : *scores) d.scores.push_back(static_cast<float>(v.as_f64(what)));
  }
  d.attrs.assign(n, TokenAttr::Normal);
  if (const GgufArray* types = find_array(g, "token_type", n)) {
    const std::string what = cat(g.name(), ": ", key("token_type"));
    for (size_t i = 0; i < n; ++i) {
      const int64_t t = (*types)[i].as_i64(what);
      TS_CHECK(t >= 0 && t <= static_cast<int64_t>(TokenAttr::Byte), g.name(), ": ", key("token_type"), "[",
               i, "] = ", t, " is not a known token type");
      d.attrs[i] = static_cast<TokenAttr>(t);
    }
  }
  if (const GgufArray* merges = find_array(g, "merges", 0)) d.merges = read_strings(g, *merges, "merges");

  d.bos = read_id(g, "bos_token_id", n);
  d.eos = read_id(g, "eos_token_id", n);
  d.unk = read_id(g, "unknown_token_id", n);
  d.eot = read_id(g, "eot_token_id", n);
  d.eom = read_id(g, "eom_token_id", n);
  // SentencePiece vocabularies add BOS unless told otherwise (as llama.cpp and transformers do).
  d.add_bos = g.get_bool(key("add_bos_token"), d.model == "llama");
  d.add_eos = g.get_bool(key("add_eos_token"), false);
  d.add_space_prefix = g.get_bool(key("add_space_prefix"), true);
  return d;
}

}  // namespace ts
