#include "eval/loglikelihood.h"

#include <algorithm>

#include "core/error.h"
#include "eval/python_text.h"
#include "eval/token_scoring.h"

namespace ts {
namespace {

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
}

}  // namespace

TokenizedPair encode_pair(const Tokenizer& tok, std::string_view context, std::string_view continuation) {
  TS_CHECK(!context.empty(), "empty context");
  const std::string_view trimmed = py::rstrip(context);
  const std::string moved = std::string(context.substr(trimmed.size())) + std::string(continuation);
  // HF tokenizers match special-token text anywhere in the input, so parse it here too.
  TokenizedPair p{tok.encode(trimmed, tok.add_bos_default(), true), {}};
  const std::vector<int32_t> whole = tok.encode(std::string(trimmed) + moved, tok.add_bos_default(), true);
  if (whole.size() > p.context.size())
    p.continuation.assign(whole.begin() + std::ssize(p.context), whole.end());
  TS_CHECK(!p.context.empty() && !p.continuation.empty(),
           "the context or the continuation encodes to no tokens");
  return p;
}

Loglikelihood LoglikelihoodScorer::score(const TokenizedPair& pair) {
  std::vector<int32_t> tokens = pair.context;
  tokens.insert(tokens.end(), pair.continuation.begin(), pair.continuation.end());
  // All tokens but the last are fed; drop from the left what does not fit.
  const size_t fed = tokens.size() - 1, drop = fed > tf_.n_ctx() ? fed - tf_.n_ctx() : 0;
  TS_CHECK(drop < pair.context.size(), "a continuation of ", pair.continuation.size(),
           " tokens does not fit the context of ", tf_.n_ctx());
  tokens.erase(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(drop));
  const size_t first_target = pair.context.size() - drop;
  // The shared prefix is reused as far as the policies can rewind to: not at all for one that
  // cannot (one ranking a call's tokens together would see only the unshared part), which then
  // scores every request as one whole call.
  const size_t shared = tf_.rewind_point(std::min(common_prefix(cached_, tokens), first_target - 1));
  Loglikelihood ll;
  score_tokens(tf_, tokens, shared, first_target, [&](const TokenScore& s) {
    ll.log_prob += s.log_prob;
    ll.greedy = ll.greedy && s.greedy;
  });
  tokens.pop_back();
  cached_ = std::move(tokens);
  return ll;
}

}  // namespace ts
