// tokensieve serve: the OpenAI-compatible HTTP server (src/server/).
#include <filesystem>

#include "cli/cli_common.h"
#include "policies/builtin_policies.h"
#include "server/http_server.h"

namespace ts::cli {
namespace {

struct ServeOptions {
  ModelOptions model;
  server::ServerOptions server;
  double shutdown_grace_s = 30;
};

void serve(ServeOptions& o) {
  // Before the engine's and the HTTP server's threads exist, so that they all leave the signals to
  // the server's shutdown thread.
  server::block_shutdown_signals();
  auto model = Model::load(o.model.model_path);
  server::ServerOptions& s = o.server;
  s.model_id = std::filesystem::path(o.model.model_path).stem().string();
  s.default_policies = o.model.policies;
  make_policy_stack(s.default_policies, *model);  // a bad --policy fails here, not on the first request
  s.engine.n_ctx = choose_ctx(o.model, *model, 2048);
  s.engine.threads = o.model.threads;
  s.engine.precision = o.model.precision();
  s.shutdown_grace = std::chrono::milliseconds(static_cast<int64_t>(o.shutdown_grace_s * 1000));
  server::serve(*model, s);
}

}  // namespace

void register_serve(CLI::App& app) {
  auto opts = std::make_shared<ServeOptions>();
  CLI::App* cmd =
      app.add_subcommand("serve", "OpenAI-compatible HTTP server with per-request policies and a web page");
  add_model_options(*cmd, opts->model, true);
  server::ServerOptions& s = opts->server;
  cmd->add_option("--host", s.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", s.port, "port (0: any free port, printed on stderr)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option(
         "--parallel", s.engine.n_slots,
         "requests run together (slots, each with its own KV cache), batched into one forward pass per step")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--batch-tokens", s.engine.batch_tokens,
                  "tokens per engine step over all slots: one decode token per generating slot, then prompt "
                  "chunks (a prompt with policies runs whole)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--queue", s.engine.max_queue, "requests waiting for a slot before new ones get 503")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--policy-files", s.policy_file_dirs,
                  "directories whose files a request's policy may name (profile=, predictor=); repeatable")
      ->capture_default_str();
  cmd->add_option("--max-body", s.limits.max_body_bytes, "largest request body in bytes (413 beyond)")
      ->capture_default_str()
      ->check(CLI::Range(1024, 1 << 30));
  cmd->add_option("--max-prompt-tokens", s.limits.max_prompt_tokens,
                  "longest prompt in tokens (default: the context)")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--max-tokens", s.limits.max_tokens, "largest max_tokens a request may ask for")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--shutdown-grace", opts->shutdown_grace_s,
                  "seconds running requests get to finish after SIGTERM before they are cancelled")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  cmd->callback([opts] { serve(*opts); });
}

}  // namespace ts::cli
