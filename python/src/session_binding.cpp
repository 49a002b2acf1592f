// tokensieve.Session: one sequence on a model under a policy stack, as `tokensieve run` and the
// scorers drive it. Every call that starts a sequence (generate, logits, token_logprobs,
// loglikelihood) clears the cache and the decision log; the engine runs with the GIL released,
// so sessions on different Python threads run at once. A session is one sequence: a second
// thread calling into a busy session gets an error, and a generation superseded by a later call
// stops with one.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <mutex>
#include <optional>

#include "bindings.h"
#include "core/error.h"
#include "eval/loglikelihood.h"
#include "eval/token_scoring.h"
#include "numpy_array.h"
#include "runtime/sampler.h"

namespace ts::python {
namespace {

class Session {
 public:
  Session(const LoadedModel& lm, const std::vector<std::string>& policies, size_t n_ctx)
      : lm_(lm),
        pool_(lm.threads),
        tf_(*lm.model, pool_, cli::choose_ctx(lm.options(policies, n_ctx), *lm.model, 4096),
            lm.exact ? MatmulPrecision::Exact : MatmulPrecision::Fast) {
    cli::attach_policies(lm.options(policies, n_ctx), *lm.model, tf_);
    tf_.set_decision_log(&log_);
    log_.policies = policies;
  }

  // Held while a call runs the engine; a second thread is refused rather than queued.
  std::unique_lock<std::mutex> claim() {
    std::unique_lock<std::mutex> lock(busy_, std::try_to_lock);
    TS_CHECK(lock.owns_lock(), "the session is busy in another thread (use one session per thread)");
    return lock;
  }
  // A new sequence: empty cache, empty log, no log-likelihood prefix to reuse.
  uint64_t restart(std::vector<int32_t> tokens) {
    lm_.check_ids(tokens);
    tf_.truncate(0);
    log_.clear();
    scorer_.reset();
    tokens_ = std::move(tokens);
    return ++epoch_;
  }
  void check_epoch(uint64_t epoch) const {
    TS_CHECK(epoch == epoch_, "this generation was superseded by a later call on its session");
  }

  const LoadedModel& lm_;
  ThreadPool pool_;
  Transformer tf_;
  DecisionLog log_;
  std::vector<int32_t> tokens_;  // the sequence: what the cache holds, and the token being sampled from
  std::optional<LoglikelihoodScorer> scorer_;
  std::string scorer_context_;  // the context the scorer's cache was filled with
  std::mutex busy_;
  uint64_t epoch_ = 0;
};

// Tokens sampled one by one; next() returns an id, or nullopt at the end. Runs as `tokensieve run`:
// the prompt in one call, then each sampled token fed back, the last one never fed.
class Generation {
 public:
  Generation(Session& s, std::vector<int32_t> prompt, size_t max_tokens, const SamplerParams& params,
             bool ignore_eos)
      : s_(s),
        sampler_(params),
        remaining_(max_tokens),
        ignore_eos_(ignore_eos),
        decoder_(s.lm_.model->tokenizer()) {
    TS_CHECK(!prompt.empty(), "the prompt is empty and the model adds no BOS token");
    TS_CHECK(prompt.size() < s.tf_.n_ctx(), "the prompt has ", prompt.size(),
             " tokens, which does not fit the session's context of ", s.tf_.n_ctx());
    auto lock = s.claim();
    epoch_ = s.restart(std::move(prompt));
  }

  std::optional<int32_t> next_id() {
    auto lock = s_.claim();
    s_.check_epoch(epoch_);
    if (done_) return std::nullopt;
    done_ = true;  // until this step completes: a step that threw ends the generation
    const bool prompt = !started_;
    started_ = true;
    if (!prompt && remaining_ == 0) return std::nullopt;
    int32_t next = -1;
    {
      nb::gil_scoped_release unlocked;
      const std::vector<int32_t>& tokens = s_.tokens_;
      // The prompt runs even for max_tokens 0, as `run -n 0` runs it.
      const std::span<const float> logits =
          prompt ? s_.tf_.forward(tokens, false) : s_.tf_.forward(std::span(&tokens.back(), 1), false);
      if (remaining_ > 0) next = sampler_.sample(logits, tokens);
    }
    if (remaining_ == 0) return std::nullopt;
    --remaining_;
    if (!ignore_eos_ && s_.lm_.model->tokenizer().is_end_of_generation(next)) return std::nullopt;
    s_.tokens_.push_back(next);
    done_ = s_.tf_.n_past() >= s_.tf_.n_ctx();  // no room to feed it
    return next;
  }
  // The text each token completes (UTF-8 held back until whole), nullopt at the end.
  std::optional<std::string> next_text() {
    while (!flushed_) {
      const std::optional<int32_t> id = next_id();
      std::string piece = id ? decoder_.push(*id) : decoder_.flush();
      flushed_ = !id;
      if (!piece.empty()) return piece;
    }
    return std::nullopt;
  }

 private:
  Session& s_;
  uint64_t epoch_ = 0;
  Sampler sampler_;
  size_t remaining_;
  bool ignore_eos_, started_ = false, done_ = false, flushed_ = false;
  StreamingDecoder decoder_;
};

SamplerParams sampler_params(float temperature, int top_k, float top_p, float min_p, float repeat_penalty,
                             int repeat_last_n, uint64_t seed) {
  TS_CHECK(temperature >= 0 && temperature <= 100, "temperature must be in [0, 100]");
  TS_CHECK(top_k >= 0, "top_k must be >= 0 (0: off)");
  TS_CHECK(top_p >= 0 && top_p <= 1, "top_p must be in [0, 1]");
  TS_CHECK(min_p >= 0 && min_p <= 1, "min_p must be in [0, 1]");
  TS_CHECK(repeat_penalty >= 0.01f && repeat_penalty <= 100, "repeat_penalty must be in [0.01, 100]");
  TS_CHECK(repeat_last_n >= 0, "repeat_last_n must be >= 0");
  return {temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed};
}

// The log-probability (and arg-max check) of tokens[i] given tokens[..i), for i >= first_target.
nb::tuple token_logprobs(Session& s, std::vector<int32_t> tokens, size_t first_target) {
  TS_CHECK(first_target >= 1 && first_target < tokens.size(), "first_target must be in [1, ", tokens.size(),
           ") for ", tokens.size(), " tokens");
  TS_CHECK(tokens.size() - 1 <= s.tf_.n_ctx(), tokens.size(), " tokens do not fit the session's context of ",
           s.tf_.n_ctx());
  auto lock = s.claim();
  s.restart(tokens);
  std::vector<double> log_probs;
  std::vector<bool> greedy_bits;
  {
    nb::gil_scoped_release unlocked;
    score_tokens(s.tf_, tokens, 0, first_target, [&](const TokenScore& t) {
      log_probs.push_back(t.log_prob);
      greedy_bits.push_back(t.greedy);
    });
  }
  std::vector<uint8_t> greedy(greedy_bits.begin(), greedy_bits.end());
  const size_t n = log_probs.size();
  return nb::make_tuple(numpy_array(std::move(log_probs), {n}), numpy_array(std::move(greedy), {n}));
}

// lm-eval's (log-likelihood, is_greedy) of a continuation, tokenized as lm-eval tokenizes a pair.
// Consecutive calls with the same context reuse its cached prefix (an example's choices) and a new
// context starts a fresh sequence, as `tokensieve eval` scores examples: under a quantized KV cache,
// keys re-fed after a shared prefix differ in the last bits from the same keys prefilled at once.
std::pair<double, bool> loglikelihood(Session& s, const std::string& context,
                                      const std::string& continuation) {
  auto lock = s.claim();
  const TokenizedPair pair = encode_pair(s.lm_.model->tokenizer(), context, continuation);
  if (!s.scorer_ || s.scorer_context_ != context) {
    s.restart({});
    s.scorer_.emplace(s.tf_);
    s.scorer_context_ = context;
  }
  s.log_.clear();
  Loglikelihood ll;
  {
    nb::gil_scoped_release unlocked;
    ll = s.scorer_->score(pair);
  }
  // What the cache holds, then the last continuation token (only a target).
  s.tokens_ = s.scorer_->cached();
  s.tokens_.push_back(pair.continuation.back());
  return {ll.log_prob, ll.greedy};
}

nb::ndarray<nb::numpy, float> logits(Session& s, std::vector<int32_t> tokens) {
  TS_CHECK(!tokens.empty() && tokens.size() <= s.tf_.n_ctx(), tokens.size(),
           " tokens: give 1 to the session's context of ", s.tf_.n_ctx());
  auto lock = s.claim();
  s.restart(tokens);
  const size_t n_vocab = s.lm_.model->config().n_vocab;
  std::vector<float> out(tokens.size() * n_vocab);
  {
    nb::gil_scoped_release unlocked;
    s.tf_.forward_logits(tokens, 0, [&](size_t first_row, std::span<const float> rows) {
      std::copy(rows.begin(), rows.end(), out.begin() + static_cast<std::ptrdiff_t>(first_row * n_vocab));
    });
  }
  return numpy_array(std::move(out), {tokens.size(), n_vocab});
}

// The decision log of the last sequence as arrays over (position, layer[, query head]):
// flags (TokenFlag bits; unrecorded layers ran dense), scores (NaN where no policy scored),
// keys_attended (-1 where no policy selected keys: every cached key), evicted (the position left
// that layer's cache).
nb::dict decisions(Session& s) {
  auto lock = s.claim();
  const DecisionLog& log = s.log_;
  const ModelConfig& c = s.lm_.model->config();
  size_t n = 0;
  for (const BatchRecord& b : log.batches) n = std::max<size_t>(n, b.pos0 + b.n_tok);
  const size_t L = c.n_layers, H = c.n_heads;
  std::vector<uint8_t> flags(n * L, kDenseToken), evicted(n * L, 0);
  std::vector<float> scores(n * L, std::numeric_limits<float>::quiet_NaN());
  std::vector<int32_t> keys(n * L * H, -1);
  for (const LayerRecord& r : log.layers) {
    const BatchRecord& b = log.batches[r.batch];
    for (uint32_t t = 0; t < b.n_tok; ++t) {
      const size_t at = size_t{b.pos0 + t} * L + r.layer;
      if (t < r.flags.size()) flags[at] = r.flags[t];
      if (t < r.scores.size()) scores[at] = r.scores[t];
      for (size_t h = 0; h < H && (t + 1) * H <= r.keys_attended.size(); ++h)
        keys[at * H + h] = static_cast<int32_t>(r.keys_attended[t * H + h]);
    }
  }
  for (const EvictionRecord& e : log.evictions)
    for (const uint32_t p : e.positions)
      if (p < n) evicted[size_t{p} * L + e.layer] = 1;
  std::vector<int32_t> tokens(s.tokens_.begin(),
                              s.tokens_.begin() + static_cast<std::ptrdiff_t>(std::min(n, s.tokens_.size())));
  tokens.resize(n, -1);
  nb::dict d;
  d["policies"] = log.policies;
  d["tokens"] = numpy_array(std::move(tokens), {n});
  d["flags"] = numpy_array(std::move(flags), {n, L});
  d["scores"] = numpy_array(std::move(scores), {n, L});
  d["keys_attended"] = numpy_array(std::move(keys), {n, L, H});
  d["evicted"] = numpy_array(std::move(evicted), {n, L});
  d["ffn_fraction"] = log.ffn_fraction();
  return d;
}

}  // namespace

void add_session(nb::module_& m) {
  m.attr("RAN_ATTENTION") = int(kRanAttention);
  m.attr("RAN_FFN") = int(kRanFfn);
  m.attr("KV_CACHED") = int(kKvCached);
  m.attr("KV_FULL_PRECISION") = int(kKvFullPrecision);
  m.attr("KV_LOW_PRECISION") = int(kKvLowPrecision);

  nb::class_<Session>(m, "Session")
      .def(nb::init<const LoadedModel&, const std::vector<std::string>&, size_t>(), nb::arg("model"),
           nb::arg("policies") = std::vector<std::string>{}, nb::arg("n_ctx") = 0, nb::keep_alive<1, 2>())
      .def_prop_ro("n_ctx", [](const Session& s) { return s.tf_.n_ctx(); })
      // Engine state is read under the session's claim: another thread may be running it.
      .def_prop_ro("n_past",
                   [](Session& s) {
                     auto lock = s.claim();
                     return s.tf_.n_past();
                   })
      .def_prop_ro("tokens",
                   [](Session& s) {
                     auto lock = s.claim();
                     return s.tokens_;
                   })
      .def_prop_ro(
          "kv_bytes",
          [](Session& s) {
            auto lock = s.claim();
            return s.tf_.cache().held_bytes();
          },
          "bytes of K/V the cache holds for the cached positions")
      .def("logits", &logits, nb::arg("tokens"))
      .def("token_logprobs", &token_logprobs, nb::arg("tokens"), nb::arg("first_target") = 1)
      .def("loglikelihood", &loglikelihood, nb::arg("context"), nb::arg("continuation"))
      .def("decisions", &decisions)
      .def(
          "generation",
          [](Session& s, std::vector<int32_t> prompt, size_t max_tokens, float temperature, int top_k,
             float top_p, float min_p, float repeat_penalty, int repeat_last_n, uint64_t seed,
             bool ignore_eos) {
            return new Generation(
                s, std::move(prompt), max_tokens,
                sampler_params(temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed),
                ignore_eos);
          },
          nb::arg("prompt"), nb::arg("max_tokens"), nb::arg("temperature"), nb::arg("top_k"),
          nb::arg("top_p"), nb::arg("min_p"), nb::arg("repeat_penalty"), nb::arg("repeat_last_n"),
          nb::arg("seed"), nb::arg("ignore_eos"), nb::keep_alive<0, 1>());

  nb::class_<Generation>(m, "Generation")
      .def("next_id", &Generation::next_id)
      .def("next_text", &Generation::next_text);
}

}  // namespace ts::python
