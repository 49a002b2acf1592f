// The server layer below HTTP: stop sequences, request checking, log-probabilities, the decisions
// grid, and the engine's slots on the real stories260K model (checked against one plain
// Transformer + Sampler run).
#include <gtest/gtest.h>

#include "eval/token_scoring.h"
#include "model/model.h"
#include "policies/builtin_policies.h"
#include "server/api_error.h"
#include "server/decisions_json.h"
#include "server/engine.h"
#include "server/logprobs.h"
#include "server/request_parse.h"
#include "server/stop_matcher.h"
#include "test_paths.h"

namespace ts::server {
namespace {

using nlohmann::json;

TEST(ServerStopMatcher, HoldsBackPossibleStartsAndCutsAtTheStop) {
  StopMatcher m({"END", "xy"});
  EXPECT_EQ(m.push("abc E"), "abc ");  // "E" may start "END"
  EXPECT_EQ(m.push("N"), "");          // "EN" still may
  EXPECT_EQ(m.push("o"), "ENo");       // not a stop after all
  EXPECT_EQ(m.push("1x"), "1");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.push("y and more"), "");  // "xy" completes: nothing from it on
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("later"), "");
  EXPECT_EQ(m.flush(), "");
}

TEST(ServerStopMatcher, EarliestStopWinsAndFlushReturnsTheTail) {
  StopMatcher m({"cd", "b"});
  EXPECT_EQ(m.push("abcd"), "a");
  StopMatcher open({"zz"});
  EXPECT_EQ(open.push("abz"), "ab");
  EXPECT_EQ(open.flush(), "z");
  StopMatcher none;
  EXPECT_EQ(none.push("anything"), "anything");
}

TEST(ServerLogprobs, MatchesLogSoftmaxAndRanksAlternatives) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
  const TokenLogprob lp = token_logprob(logits, 4, 3);
  EXPECT_NEAR(*lp.logprob, token_log_prob(logits.data(), logits.size(), 4), 1e-12);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 1);  // ties by id
  EXPECT_EQ(lp.top[1].first, 3);
  EXPECT_EQ(lp.top[2].first, 0);
  EXPECT_NEAR(lp.top[0].second, token_log_prob(logits.data(), logits.size(), 1), 1e-12);
  EXPECT_TRUE(token_logprob(logits, 0, 0).top.empty());
}

class ServerModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = Model::load(shared_path("models/stories260K.gguf")).release(); }
  static void TearDownTestSuite() { delete model_; }
  static const Tokenizer& tok() { return model_->tokenizer(); }

  // Status of the ApiError parse_completion throws for this body, 0 when it accepts it.
  static int completion_status(const json& body, const ServerLimits& limits = {}) {
    try {
      parse_completion(body, tok(), limits, 256);
      return 0;
    } catch (const ApiError& e) {
      return e.status();
    }
  }

  // Greedy tokens from one plain Transformer + Sampler, as `tokensieve run --temp 0` makes them.
  static std::vector<int32_t> reference_greedy(const std::vector<int32_t>& prompt, int n,
                                               const std::vector<std::string>& specs = {}) {
    ThreadPool pool(1);
    Transformer tf(*model_, pool, 256);
    if (!specs.empty()) tf.set_policies(make_policy_stack(specs, *model_));
    Sampler sampler(SamplerParams{.temperature = 0.0f});
    std::vector<int32_t> tokens = prompt;
    std::span<const float> logits = tf.forward(tokens, false);
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
      out.push_back(sampler.sample(logits, tokens));
      tokens.push_back(out.back());
      logits = tf.forward(std::span(&tokens.back(), 1), false);
    }
    return out;
  }

  // The text `generated` adds after `prompt` (SentencePiece drops a leading space only at the start).
  static std::string generated_text(std::vector<int32_t> prompt, const std::vector<int32_t>& generated) {
    const std::string before = tok().decode(prompt);
    prompt.insert(prompt.end(), generated.begin(), generated.end());
    return tok().decode(prompt).substr(before.size());
  }

  // Greedy, ignoring end-of-generation: exactly max_tokens tokens, the same in any run.
  static GenerationParams greedy_params(int max_tokens) {
    GenerationParams p;
    p.max_tokens = max_tokens;
    p.sampling.temperature = 0.0f;
    p.ignore_eos = true;
    return p;
  }

  static std::string run_to_end(Job& job) {
    std::string text;
    for (;;) {
      std::optional<Job::Update> u = job.take(std::chrono::seconds(30));
      if (!u) ADD_FAILURE() << "no update in 30 s";
      if (!u) return text;
      for (const auto& piece : u->pieces) text += piece.text;
      if (u->done) return text + "|" + u->finish_reason;
    }
  }

  static inline Model* model_ = nullptr;
};

TEST_F(ServerModel, ParsesCompletionBodies) {
  const ParsedRequest r = parse_completion(json{{"prompt", json::array({"Once", "Tom"})},
                                                {"max_tokens", 7},
                                                {"temperature", 0},
                                                {"seed", 3},
                                                {"stop", "x"},
                                                {"policy", "sleb:layers=1"},
                                                {"logprobs", 2},
                                                {"echo", true}},
                                           tok(), {}, 256);
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[0], tok().encode("Once", tok().add_bos_default(), true));
  EXPECT_EQ(r.prompt_texts[1], "Tom");
  EXPECT_EQ(r.params.max_tokens, 7);
  EXPECT_EQ(r.params.sampling.temperature, 0.0f);
  EXPECT_EQ(r.params.sampling.seed, 3u);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.policies, std::vector<std::string>{"sleb:layers=1"});
  EXPECT_EQ(r.params.logprobs, 2);
  EXPECT_TRUE(r.params.echo);
  EXPECT_FALSE(
      parse_completion(json{{"prompt", "a"}}, tok(), {}, 256).policies.has_value());  // server default
  EXPECT_EQ(parse_completion(json{{"prompt", json::array({1, 2, 3})}}, tok(), {}, 256).prompts[0],
            (std::vector<int32_t>{1, 2, 3}));
}

TEST_F(ServerModel, RejectsBadCompletionBodies) {
  EXPECT_EQ(completion_status(json{{"prompt", "a"}}), 0);
  EXPECT_EQ(completion_status(json::array({1})), 400);
  EXPECT_EQ(completion_status(json{{"max_tokens", 3}}), 400);
  EXPECT_EQ(completion_status(json{{"prompt", "a"}, {"max_tokens", "3"}}), 400);
  EXPECT_EQ(completion_status(json{{"prompt", "a"}, {"max_tokens", 3.5}}), 400);
  EXPECT_EQ(completion_status(json{{"prompt", "a"}, {"max_tokens", 0}}), 400);  // without echo
  EXPECT_EQ(completion_status(json{{"prompt", "a"}, {"max_tokens", 0}, {"echo", true}}), 0);
  EXPECT_EQ(completion_status(json{{"prompt", "a"}, {"temperature", 2.5}}), 400);
  EXPECT_EQ(completion_status(json{{"prompt", "a"}, {"n", 2}}), 400);
  EXPECT_EQ(completion_status(json{{"prompt", "a"}, {"frequency_penalty", 0.5}}), 400);
  EXPECT_EQ(completion_status(json{{"prompt", "a"}, {"frequency_penalty", 0}}), 0);
  EXPECT_EQ(completion_status(json{{"prompt", "a"}, {"unknown", 1}}), 400);
  EXPECT_EQ(completion_status(json{{"prompt", "a"}, {"stop", json::array({"a", "b", "c", "d", "e"})}}), 400);
  EXPECT_EQ(completion_status(json{{"prompt", "a"}, {"stop", ""}}), 400);
  EXPECT_EQ(completion_status(json{{"prompt", json::array({-1})}}), 400);
  EXPECT_EQ(completion_status(json{{"prompt", json::array({"a", "b"})}, {"stream", true}}), 400);
  EXPECT_EQ(completion_status(json{{"prompt", "a"}, {"seed", -1}}), 400);
  EXPECT_EQ(completion_status(json{{"prompt", "a"}, {"seed", 18446744073709551615ull}}), 400);
  ServerLimits short_prompts;
  short_prompts.max_prompt_tokens = 4;
  EXPECT_EQ(completion_status(json{{"prompt", "one two three four five"}}, short_prompts), 400);
  EXPECT_EQ(completion_status(json{{"prompt", "one"}}, short_prompts), 0);
}

TEST_F(ServerModel, PolicyFieldForms) {
  EXPECT_EQ(parse_policy_field("sleb:layers=1"), std::vector<std::string>{"sleb:layers=1"});
  EXPECT_EQ(parse_policy_field(""), std::vector<std::string>{});
  EXPECT_EQ(parse_policy_field(json::array({"a", "b:x=1"})), (std::vector<std::string>{"a", "b:x=1"}));
  EXPECT_THROW(parse_policy_field(3), ApiError);
  EXPECT_THROW(parse_policy_field(json::array({"a", 1})), ApiError);
}

TEST_F(ServerModel, ChatNeedsATemplate) {
  const json body = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
  EXPECT_THROW(parse_chat(body, tok(), nullptr, {}, 256), ApiError);
  const ChatTemplate chatml;
  const ParsedRequest r = parse_chat(body, tok(), &chatml, {}, 256);
  EXPECT_EQ(r.prompts[0], tok().encode(chatml.render({{"user", "hi"}}, true), tok().add_bos_default(), true));
}

TEST_F(ServerModel, EngineGreedyMatchesAPlainRunAndSlotsDoNotInterfere) {
  // No BOS: the prompts share no prefix, so where each job lands does not depend on whether a
  // finished before b was submitted (b then takes the empty slot, keeping a's cache for c).
  const std::vector<int32_t> a = tok().encode("Once upon a time", false, false),
                             b = tok().encode("Tom had", false, false);
  Engine engine(*model_, {.n_slots = 2, .n_ctx = 256, .threads = 1});
  const GenerationParams greedy = greedy_params(30);
  // Three jobs on two slots: two decode interleaved, the third waits in the queue.
  auto ja = engine.submit({a, greedy, nullptr, "a"});
  auto jb = engine.submit({b, greedy, nullptr, "b"});
  auto jc = engine.submit({a, greedy, nullptr, "c"});
  const std::string expect_a = generated_text(a, reference_greedy(a, 30)) + "|length";
  EXPECT_EQ(run_to_end(*ja), expect_a);
  EXPECT_EQ(run_to_end(*jb), generated_text(b, reference_greedy(b, 30)) + "|length");
  EXPECT_EQ(run_to_end(*jc), expect_a);
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.generated_tokens, 90u);
  // c starts with a's prompt, which a's idle slot still caches: only its last token is prefilled.
  EXPECT_EQ(s.prefix_hits, 1u);
  EXPECT_EQ(s.prefix_tokens_reused, a.size() - 1);
  EXPECT_EQ(s.prompt_tokens, a.size() + b.size() + 1);
  EXPECT_EQ(s.jobs_finished, 3u);
}

// An idle slot's cache is overwritten only when no emptier slot will do: a's cache, left alone by b,
// serves c.
TEST_F(ServerModel, AdmissionKeepsACachedPromptForALaterJob) {
  const std::vector<int32_t> a = tok().encode("Once upon a time", false, false),
                             b = tok().encode("Tom had", false, false);
  Engine engine(*model_, {.n_slots = 2, .n_ctx = 256, .threads = 1});
  const GenerationParams greedy = greedy_params(4);
  run_to_end(*engine.submit({a, greedy, nullptr, "a"}));
  run_to_end(*engine.submit({b, greedy, nullptr, "b"}));
  run_to_end(*engine.submit({a, greedy, nullptr, "c"}));
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.prefix_hits, 1u);
  EXPECT_EQ(s.prefix_tokens_reused, a.size() - 1);
}

// Six jobs with different policies share every step (a budget of 8 tokens cuts the prompts into
// chunks, except those whose policies rank a call whole): each generates what it generates alone.
TEST_F(ServerModel, MixedPolicyBatchGivesEachJobItsSingleRunOutput) {
  const std::vector<std::vector<std::string>> specs = {
      {},
      {"orthorank:layers=1,3"},
      {"kvquant:bits=4,group=16,prefill=quantized", "pfn:n=2"},
      {"zipvl:tau=0.9"},
      {"h2o:keep=0.5"},
      {"tokenfilter:ratio=0.3"},
      {}};
  Engine engine(*model_, {.n_slots = specs.size(), .batch_tokens = 8, .n_ctx = 256, .threads = 2});
  const GenerationParams greedy = greedy_params(20);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::shared_ptr<Job>> jobs;
  for (size_t i = 0; i < specs.size(); ++i) {
    prompts.push_back(tok().encode("Once upon a time there was a girl named " + std::string(i + 1, 'A') +
                                       " who liked to play in the park with her dog",
                                   true, false));
    jobs.push_back(
        engine.submit({prompts[i], greedy, specs[i].empty() ? nullptr : make_policy_stack(specs[i], *model_),
                       std::to_string(i)}));
  }
  for (size_t i = 0; i < specs.size(); ++i)
    EXPECT_EQ(run_to_end(*jobs[i]),
              generated_text(prompts[i], reference_greedy(prompts[i], 20, specs[i])) + "|length")
        << "job " << i << (specs[i].empty() ? " (dense)" : " " + specs[i][0]);
  const EngineStats s = engine.stats();
  EXPECT_GT(s.batch_sequences.n, s.batch_sequences.counts[0]) << "no step ran more than one sequence";
  EXPECT_LE(s.batch_rows.sum, double(s.prompt_tokens + s.generated_tokens));
}

TEST_F(ServerModel, EngineCancelsAndRefusesAfterShutdown) {
  Engine engine(*model_, {.n_slots = 1, .n_ctx = 256, .threads = 1, .max_queue = 2});
  GenerationParams long_run;
  long_run.max_tokens = 200;
  long_run.ignore_eos = true;
  const std::vector<int32_t> p = tok().encode("Lily", true, false);
  auto running = engine.submit({p, long_run, nullptr, "r"});
  auto queued = engine.submit({p, long_run, nullptr, "q"});
  queued->cancel();
  running->cancel();
  EXPECT_TRUE(run_to_end(*running).ends_with("|cancelled"));
  EXPECT_EQ(run_to_end(*queued), "|cancelled");
  engine.shutdown(std::chrono::milliseconds(0));
  try {
    engine.submit({p, long_run, nullptr, "late"});
    FAIL() << "a job was taken after shutdown";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 503);
  }
}

TEST_F(ServerModel, EchoLogprobsMatchOneForwardPass) {
  Engine engine(*model_, {.n_slots = 1, .n_ctx = 256, .threads = 1});
  GenerationParams p;
  p.max_tokens = 0;
  p.echo = true;
  p.logprobs = 1;
  const std::vector<int32_t> prompt = tok().encode("Once upon a time there was", true, false);
  auto job = engine.submit({prompt, p, nullptr, "e"});
  std::optional<Job::Update> u = job->take(std::chrono::seconds(30));
  ASSERT_TRUE(u && !u->prompt_logprobs.empty());
  ASSERT_EQ(u->prompt_logprobs.size(), prompt.size());
  EXPECT_FALSE(u->prompt_logprobs[0].logprob.has_value());
  ThreadPool pool(1);
  Transformer tf(*model_, pool, 256);
  const size_t n_vocab = model_->config().n_vocab;
  const auto logits = tf.forward(prompt, true);
  for (size_t i = 1; i < prompt.size(); ++i)
    EXPECT_DOUBLE_EQ(*u->prompt_logprobs[i].logprob,
                     token_log_prob(&logits[(i - 1) * n_vocab], n_vocab, prompt[i]));
}

TEST_F(ServerModel, DecisionsGridMarksSkippedLayers) {
  ThreadPool pool(1);
  Transformer tf(*model_, pool, 64);
  DecisionLog log;
  tf.set_decision_log(&log);
  const std::vector<std::string> specs = {"sleb:layers=2"};
  tf.set_policies(make_policy_stack(specs, *model_));
  const std::vector<int32_t> tokens = tok().encode("Once upon a time", true, false);
  tf.forward(tokens, false);
  const json d = decisions_json(log, tokens, *model_, "id");
  EXPECT_EQ(d["request_id"], "id");
  EXPECT_EQ(d["policies"], json::array({"sleb:layers=2"}));
  ASSERT_EQ(d["flags"].size(), model_->config().n_layers);
  for (size_t layer = 0; layer < model_->config().n_layers; ++layer) {
    ASSERT_EQ(d["flags"][layer].size(), tokens.size());
    for (const json& f : d["flags"][layer]) {
      if (layer == 2) {
        EXPECT_EQ(f.get<int>() & (kRanAttention | kRanFfn), 0);
      } else {
        EXPECT_EQ(f.get<int>(), kDenseToken);
      }
    }
  }
  EXPECT_LT(d["ffn_fraction"].get<double>(), 1.0);
  EXPECT_EQ(d["layer_windows"], json(std::vector<uint32_t>(model_->config().n_layers, 0)));  // no windows
}

// With key lists: [layer][position][head], null on layers without key selection; without, no field.
TEST_F(ServerModel, DecisionsListTheAttendedKeysWhenAsked) {
  ThreadPool pool(1);
  const std::vector<int32_t> tokens = tok().encode("Once upon a time there was", true, false);
  const size_t heads = model_->config().n_heads, n_layers = model_->config().n_layers;
  for (bool lists : {false, true}) {
    Transformer tf(*model_, pool, 64);
    DecisionLog log;
    log.key_lists = lists;
    tf.set_decision_log(&log);
    const std::vector<std::string> specs = {"streaming:sinks=1,window=2,first_layer=1"};
    tf.set_policies(make_policy_stack(specs, *model_));
    tf.forward(tokens, false);
    const json d = decisions_json(log, tokens, *model_, "id");
    ASSERT_EQ(d.contains("key_lists"), lists);
    if (!lists) continue;
    ASSERT_EQ(d["key_lists"].size(), n_layers);
    for (size_t layer = 0; layer < n_layers; ++layer) {
      if (layer == 0) {
        EXPECT_TRUE(d["key_lists"][layer].is_null()) << layer;
        continue;
      }
      ASSERT_EQ(d["key_lists"][layer].size(), tokens.size());
      for (size_t pos = 0; pos < tokens.size(); ++pos) {
        ASSERT_EQ(d["key_lists"][layer][pos].size(), heads);
        // the sink and the two latest positions
        std::vector<uint32_t> want = {0};
        for (size_t j = pos >= 2 ? pos - 1 : 1; j <= pos; ++j) want.push_back(static_cast<uint32_t>(j));
        if (pos == 0) want = {0};
        for (size_t h = 0; h < heads; ++h)
          EXPECT_EQ(d["key_lists"][layer][pos][h].get<std::vector<uint32_t>>(), want) << layer << " " << pos;
      }
    }
  }
}

// Local layers are marked as such: the grid carries the model's window per layer.
TEST(Decisions, LayerWindowsAreTheModelsSlidingWindows) {
  const auto model = Model::load(source_path("tests/fixtures/models/tiny-gemma3.gguf"));
  const json d = decisions_json(DecisionLog{}, std::vector<int32_t>{65, 66}, *model, "id");
  EXPECT_EQ(d["layer_windows"], json::array({8, 8, 8, 8, 8, 0, 8}));  // layer 5 is global
}

}  // namespace
}  // namespace ts::server
