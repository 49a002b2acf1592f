#pragma once
// tokensieve serve: an OpenAI-compatible HTTP server over the engine, with per-request policies
// and a web page showing what they decided.
#include <chrono>
#include <string>
#include <vector>

#include "model/model.h"
#include "server/engine.h"
#include "server/request_parse.h"

namespace ts::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (printed on stderr)
  std::string model_id;
  std::vector<std::string> default_policies;  // requests without a `policy` field
  // The only directories whose files a request's policy may name (profile=, predictor=).
  std::vector<std::string> policy_file_dirs{"profiles", "predictors"};
  EngineOptions engine;
  ServerLimits limits;
  std::chrono::milliseconds shutdown_grace{30000};  // SIGTERM: time in-flight requests get to finish
};

// Blocks SIGTERM and SIGINT in this thread and every thread started after it, so that serve() can
// wait for them; call before any thread is created.
void block_shutdown_signals();

// Serves until SIGTERM or SIGINT, then shuts down gracefully: new requests get 503, running ones
// finish (cancelled after the grace period), and serve() returns.
void serve(const Model& model, const ServerOptions& options);

}  // namespace ts::server
