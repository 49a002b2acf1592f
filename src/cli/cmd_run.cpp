// tokensieve run: stream a completion (or a chat reply) for one prompt.
#include <chrono>
#include <cstdio>
#include <fstream>

#include "cli/cli_common.h"
#include "core/error.h"
#include "model/chat_template.h"
#include "runtime/sampler.h"
#include "runtime/transformer.h"
#include "server/api_error.h"
#include "server/decisions_json.h"

namespace ts::cli {
namespace {

struct RunOptions {
  ModelOptions model;
  std::string prompt;
  int n_predict = 128;
  bool chat = false;
  bool ignore_eos = false;
  std::string decision_log;  // file for the decisions as JSON ("" = none)
  bool decision_log_keys = false;
  SamplerParams sampling;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void run(const RunOptions& o) {
  auto model = Model::load(o.model.model_path);
  const Tokenizer& tok = model->tokenizer();
  std::string text = o.prompt;
  if (o.chat) text = ChatTemplate::from_gguf(model->gguf()).render({{"user", o.prompt}}, true);
  std::vector<int32_t> tokens = tok.encode(text, tok.add_bos_default(), /*parse_special=*/true);
  TS_CHECK(!tokens.empty(), "the prompt is empty and the model adds no BOS token; give a prompt with -p");

  const size_t n_ctx = choose_ctx(o.model, *model, 4096);
  TS_CHECK(tokens.size() < n_ctx, "the prompt has ", tokens.size(),
           " tokens, which does not fit the context of ", n_ctx, " (raise -c)");
  ThreadPool pool(o.model.threads);
  Transformer tf(*model, pool, n_ctx, o.model.precision());
  attach_policies(o.model, *model, tf);
  DecisionLog decisions;
  decisions.key_lists = o.decision_log_keys;
  tf.set_decision_log(&decisions);
  Sampler sampler(o.sampling);
  StreamingDecoder out(tok);

  if (!o.chat) std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  auto t0 = std::chrono::steady_clock::now();
  std::span<const float> logits = tf.forward(tokens, false);
  const double prompt_s = seconds_since(t0);
  const size_t n_prompt = tokens.size();
  const std::string kv_after_prompt =
      tf.policies() ? held_kv_summary(tf.cache(), model->config().n_layers) : "";

  t0 = std::chrono::steady_clock::now();
  int generated = 0;
  while (generated < o.n_predict && tf.n_past() < n_ctx) {
    const int32_t next = sampler.sample(logits, tokens);
    ++generated;
    if (!o.ignore_eos && tok.is_end_of_generation(next)) break;
    tokens.push_back(next);
    std::fputs(out.push(next).c_str(), stdout);
    std::fflush(stdout);
    if (generated == o.n_predict || tf.n_past() >= n_ctx) break;
    logits = tf.forward(std::span(&tokens.back(), 1), false);
  }
  std::fputs(out.flush().c_str(), stdout);
  std::fputs("\n", stdout);
  const double gen_s = seconds_since(t0);
  std::fprintf(stderr, "prompt: %zu tokens, %.1f tok/s | generation: %d tokens, %.1f tok/s | threads %d\n",
               n_prompt, n_prompt / prompt_s, generated, generated / gen_s, pool.size());
  if (tf.policies())
    std::fprintf(stderr, "policies: FFN ran for %.1f%% of (token, layer) pairs; after the prompt %s\n",
                 100.0 * decisions.ffn_fraction(), kv_after_prompt.c_str());
  if (!o.decision_log.empty()) {
    std::ofstream f(o.decision_log, std::ios::trunc);
    const std::span<const int32_t> ran = std::span(tokens).first(tf.n_past());
    f << server::dump_json(server::decisions_json(decisions, ran, *model, "run")) << "\n";
    TS_CHECK(f, o.decision_log, ": cannot write the decision log");
  }
}

}  // namespace

void register_run(CLI::App& app) {
  auto opts = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "generate text from a prompt");
  add_model_options(*cmd, opts->model, true);
  cmd->add_option("-p,--prompt", opts->prompt, "prompt text")->required();
  cmd->add_option("-n,--n-predict", opts->n_predict, "tokens to generate")->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("--chat", opts->chat, "wrap the prompt in the model's chat template as a user message");
  cmd->add_flag("--ignore-eos", opts->ignore_eos, "keep generating past end-of-generation tokens");
  cmd->add_option("--decision-log", opts->decision_log,
                  "write what the policies decided (per batch, layer and token) to this JSON file");
  cmd->add_flag("--decision-log-keys", opts->decision_log_keys,
                "with --decision-log: also the key positions each (token, query head) attended where a "
                "policy selected keys (large: every key listed)")
      ->needs("--decision-log");
  SamplerParams& s = opts->sampling;
  cmd->add_option("--temp", s.temperature, "temperature (0 = greedy)")->check(CLI::Range(0.0f, 100.0f));
  cmd->add_option("--top-k", s.top_k, "top-k (0 = off)")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--top-p", s.top_p, "top-p (1 = off)")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--min-p", s.min_p, "min-p (0 = off)")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--repeat-penalty", s.repeat_penalty, "repetition penalty (1 = off)")
      ->check(CLI::Range(0.01f, 100.0f));
  cmd->add_option("--repeat-last-n", s.repeat_last_n, "tokens the penalty looks back")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--seed", s.seed, "random seed");
  cmd->callback([opts] { run(*opts); });
}

}  // namespace ts::cli
