#include "eval/generation.h"

#include <algorithm>

#include "core/error.h"

namespace ts {
namespace {

int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

bool has_text(const std::string& s) { return s.find_first_not_of(" \t\r\n") != std::string::npos; }

}  // namespace

std::vector<int32_t> greedy_generate(Transformer& tf, const Tokenizer& tok, std::span<const int32_t> prompt,
                                     const GenerationLimits& limits) {
  TS_CHECK(!prompt.empty(), "empty prompt");
  TS_CHECK(prompt.size() <= tf.n_ctx(), "a prompt of ", prompt.size(), " tokens does not fit the context of ",
           tf.n_ctx());
  tf.truncate(0);
  std::vector<int32_t> out;
  std::string text;
  std::span<const float> logits = tf.forward(prompt, false);
  while (out.size() < limits.max_new_tokens) {
    const int32_t next = argmax(logits);
    if (tok.is_end_of_generation(next)) break;
    out.push_back(next);
    if (limits.stop_at_newline) {
      const std::string piece = tok.token_to_bytes(next);
      if (piece.find('\n') != std::string::npos && has_text(text + piece.substr(0, piece.find('\n')))) break;
      text += piece;
    }
    if (out.size() == limits.max_new_tokens || tf.n_past() >= tf.n_ctx()) break;
    logits = tf.forward(std::span(&out.back(), 1), false);
  }
  return out;
}

std::vector<bool> argmax_hits(Transformer& tf, const TokenizedPair& pair) {
  std::vector<int32_t> tokens = pair.context;
  tokens.insert(tokens.end(), pair.continuation.begin(), pair.continuation.end());
  TS_CHECK(tokens.size() - 1 <= tf.n_ctx(), "an input of ", tokens.size(),
           " tokens does not fit the context of ", tf.n_ctx());
  const size_t n_vocab = tf.model().config().n_vocab;
  std::vector<bool> hits;
  tf.truncate(0);
  // One call for the whole input; rows from the last context token on predict the continuation.
  tf.forward_logits(std::span(tokens).first(tokens.size() - 1), pair.context.size() - 1,
                    [&](size_t first_row, std::span<const float> logits) {
                      for (size_t r = 0; r < logits.size() / n_vocab; ++r) {
                        const int32_t target = tokens[first_row + r + 1];
                        hits.push_back(argmax(logits.subspan(r * n_vocab, n_vocab)) == target);
                      }
                    });
  return hits;
}

}  // namespace ts
