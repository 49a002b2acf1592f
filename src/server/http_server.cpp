#include "server/http_server.h"

#include <httplib.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <optional>
#include <random>

#include "policies/builtin_policies.h"
#include "server/api_error.h"
#include "server/metrics.h"
#include "server/policy_files.h"
#include "server/response_stream.h"
#include "server/web_page.h"

namespace ts::server {
namespace {

using nlohmann::json;

sigset_t shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return cat(prefix, std::hex, rng());
}

// cpp-httplib 0.11 listens with a backlog of 5 (compiled into Debian's library), so a burst of
// clients overflows the accept queue: their SYNs are dropped and retried a second later, and under
// heavy load a connection can be reset. listen() again on the bound socket raises the backlog; the
// socket is found among our descriptors as the one listening on `port`.
void raise_listen_backlog(int port) {
  for (int fd = 3; fd < 1024; ++fd) {
    int listening = 0;
    socklen_t len = sizeof(listening);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    sockaddr_storage addr{};
    len = sizeof(addr);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) continue;
    const int bound = addr.ss_family == AF_INET    ? ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port)
                      : addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                                   : -1;
    if (bound == port) ::listen(fd, SOMAXCONN);
  }
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class HttpServer {
 public:
  HttpServer(const Model& model, const ServerOptions& options)
      : model_(model), options_(options), engine_(model, options.engine) {
    try {
      chat_.emplace(ChatTemplate::from_gguf(model.gguf()));
    } catch (const Error&) {
      // no template: chat completions are refused with a clear error
    }
    routes();
  }

  void run() {
    const int port = options_.port == 0
                         ? http_.bind_to_any_port(options_.host)
                         : (http_.bind_to_port(options_.host, options_.port) ? options_.port : -1);
    TS_CHECK(port > 0, "cannot listen on ", options_.host, ":", options_.port);
    raise_listen_backlog(port);
    std::fprintf(stderr, "listening on http://%s:%d (%zu slots, context %zu)\n", options_.host.c_str(), port,
                 options_.engine.n_slots, options_.engine.n_ctx);
    std::thread on_signal([this] {
      const sigset_t set = shutdown_signals();
      int sig = 0;
      sigwait(&set, &sig);
      std::fprintf(stderr, "shutting down (signal %d): finishing running requests\n", sig);
      engine_.shutdown(options_.shutdown_grace);
      // Let the responses write their last events before the listener goes.
      for (int i = 0; i < 200 && open_responses_ > 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      http_.stop();
    });
    http_.listen_after_bind();
    on_signal.join();
  }

 private:
  void routes() {
    http_.new_task_queue = [this] {
      // Every open connection holds a thread; enough for all slots and the queue, plus the page.
      return new httplib::ThreadPool(options_.engine.n_slots + options_.engine.max_queue + 8);
    };
    http_.set_payload_max_length(options_.limits.max_body_bytes);
    // An idle keep-alive connection holds a thread, and shutdown waits for it.
    http_.set_keep_alive_timeout(2);
    // A stream is many small writes: without this, Nagle's algorithm holds the first event of a
    // request that follows another on a keep-alive connection until the client acknowledges (~40 ms).
    http_.set_tcp_nodelay(true);
    http_.set_error_handler([](const httplib::Request&, httplib::Response& res) {
      if (!res.body.empty()) return;
      const std::string message = res.status == 413   ? "the request body is too large"
                                  : res.status == 404 ? "no such route"
                                                      : cat("HTTP status ", res.status);
      res.set_content(dump_json(error_body(message, "invalid_request_error", res.status)),
                      "application/json");
    });
    http_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      try {
        std::rethrow_exception(ep);
      } catch (const ApiError& e) {
        res.status = e.status();
        res.set_content(dump_json(error_body(e.what(), e.type(), e.status())), "application/json");
      } catch (const std::exception& e) {
        res.status = 500;
        res.set_content(dump_json(error_body(e.what(), "server_error", 500)), "application/json");
      }
    });
    http_.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      requests_.add(req.matches.empty() ? "other" : req.path, res.status);
    });

    http_.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(web_page_html()), "text/html; charset=utf-8");
    });
    http_.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      const EngineStats s = engine_.stats();
      json_reply(
          res, {{"status", "ok"}, {"slots", s.slots}, {"slots_active", s.active}, {"queue_depth", s.queued}});
    });
    http_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      json_reply(res, {{"object", "list"},
                       {"data",
                        {{{"id", options_.model_id},
                          {"object", "model"},
                          {"created", unix_seconds()},
                          {"owned_by", "tokensieve"},
                          {"max_model_len", engine_.n_ctx()}}}}});
    });
    http_.Get("/v1/policies", [this](const httplib::Request&, httplib::Response& res) {
      json data = json::array();
      for (const auto& e : describe_policies(builtin_policies()))
        data.push_back({{"name", e["name"]},
                        {"options", e["usage"]},
                        {"description", e["summary"]},
                        {"parameters", e["options"]}});
      json_reply(res, {{"object", "list"}, {"data", data}, {"default", options_.default_policies}});
    });
    http_.Get("/v1/decisions/last", [this](const httplib::Request&, httplib::Response& res) {
      json d = engine_.last_decisions();
      if (d.is_null()) throw ApiError(404, "no request has finished yet");
      json_reply(res, d);
    });
    http_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(prometheus_text(requests_, engine_.stats()), "text/plain; version=0.0.4");
    });
    http_.Get("/tokenizer_info", [this](const httplib::Request&, httplib::Response& res) {
      const Tokenizer& tok = model_.tokenizer();
      const auto text = [&](int32_t id) {
        return id >= 0 ? json(tok.token_to_bytes(id, true)) : json(nullptr);
      };
      json_reply(res, {{"eos_token", text(tok.eos())},
                       {"bos_token", text(tok.bos())},
                       {"pad_token", nullptr},
                       {"add_bos_token", tok.add_bos_default()},
                       {"max_model_len", engine_.n_ctx()}});
    });
    http_.Post("/tokenize",
               [this](const httplib::Request& req, httplib::Response& res) { tokenize(req, res); });
    http_.Post("/detokenize",
               [this](const httplib::Request& req, httplib::Response& res) { detokenize(req, res); });
    http_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      const json body = parse_body(req.body);
      generate(Endpoint::Completions,
               parse_completion(body, model_.tokenizer(), options_.limits, engine_.n_ctx()), res);
    });
    http_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      const json body = parse_body(req.body);
      generate(
          Endpoint::Chat,
          parse_chat(body, model_.tokenizer(), chat_ ? &*chat_ : nullptr, options_.limits, engine_.n_ctx()),
          res);
    });
  }

  static void json_reply(httplib::Response& res, const json& j) {
    res.set_content(dump_json(j), "application/json");
  }

  // vLLM's tokenizer routes, which lm-evaluation-harness's remote tokenizer uses.
  void tokenize(const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req.body);
    if (!body.is_object() || !body.contains("prompt") || !body["prompt"].is_string())
      bad_request("'prompt' must be a string");
    const json add = body.value("add_special_tokens", json(true));
    if (!add.is_boolean()) bad_request("'add_special_tokens' must be true or false");
    const Tokenizer& tok = model_.tokenizer();
    const std::vector<int32_t> ids =
        tok.encode(body["prompt"].get<std::string>(), add.get<bool>() && tok.add_bos_default(), true);
    json_reply(res, {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", engine_.n_ctx()}});
  }

  void detokenize(const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req.body);
    if (!body.is_object() || !body.contains("tokens") || !body["tokens"].is_array())
      bad_request("'tokens' must be a list of token ids");
    std::vector<int32_t> ids;
    for (const json& id : body["tokens"]) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          id.get<int64_t>() >= model_.tokenizer().n_vocab())
        bad_request("'tokens' must be token ids in [0, ", model_.tokenizer().n_vocab(), ")");
      ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
    json_reply(res, {{"prompt", model_.tokenizer().decode(ids)}});
  }

  void generate(Endpoint endpoint, ParsedRequest request, httplib::Response& res) {
    const std::vector<std::string> specs = request.policies.value_or(options_.default_policies);
    ResponseHeader header{random_id(endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-"), unix_seconds(),
                          options_.model_id};
    // Every stack is built (and the specs checked against the model) before any job is queued.
    if (request.policies) {
      try {
        check_policy_files(*request.policies, options_.policy_file_dirs);
      } catch (const Error& e) {
        bad_request("policy: ", e.what());
      }
    }
    std::vector<JobInput> inputs;
    for (const auto& prompt : request.prompts) {
      std::unique_ptr<PolicyStack> stack;
      try {
        stack = make_policy_stack(specs, model_);
      } catch (const Error& e) {
        bad_request("policy: ", e.what());
      }
      inputs.push_back({prompt, request.params, std::move(stack), header.id});
    }
    std::vector<std::shared_ptr<Job>> jobs;
    try {
      for (JobInput& input : inputs) jobs.push_back(engine_.submit(std::move(input)));
    } catch (const ApiError&) {
      for (const auto& job : jobs) job->cancel();
      throw;
    }
    const bool stream = request.stream;
    auto out = std::make_shared<ResponseStream>(endpoint, std::move(header), std::move(request),
                                                std::move(jobs), model_.tokenizer());
    ++open_responses_;
    res.set_chunked_content_provider(
        stream ? "text/event-stream" : "application/json",
        [out](size_t, httplib::DataSink& sink) { return out->pump(sink); },
        [this, out](bool success) {
          if (!success) out->cancel();
          --open_responses_;
        });
  }

  const Model& model_;
  const ServerOptions& options_;
  Engine engine_;
  std::optional<ChatTemplate> chat_;
  httplib::Server http_;
  RequestCounts requests_;
  std::atomic<int> open_responses_{0};
};

}  // namespace

void block_shutdown_signals() {
  const sigset_t set = shutdown_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up is a failed write, not the end of the server
}

void serve(const Model& model, const ServerOptions& options) {
  HttpServer server(model, options);
  server.run();
}

}  // namespace ts::server
