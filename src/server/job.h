#pragma once
// One generation request as the engine runs it, and the channel its HTTP response reads from:
// the engine publishes text and log-probabilities as it goes, the response thread takes what is new.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/policy_stack.h"
#include "runtime/sampler.h"
#include "server/logprobs.h"

namespace ts::server {

struct GenerationParams {
  int max_tokens = 16;
  SamplerParams sampling{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f};
  std::vector<std::string> stop;
  int logprobs = -1;        // alternatives per token; -1: no log-probabilities
  bool echo = false;        // also the prompt's tokens (with log-probabilities when asked)
  bool ignore_eos = false;  // keep generating past end-of-generation tokens (fixed-length benchmarks)
};

struct JobInput {
  std::vector<int32_t> prompt;
  GenerationParams params;
  std::unique_ptr<PolicyStack> policies;  // nullptr: dense
  std::string request_id;
};

class Job {
 public:
  // What the engine produced since the previous take().
  struct Update {
    std::vector<TokenLogprob> prompt_logprobs;  // once, after the prompt ran, when echo with logprobs
    // Per generated token: the text it made safe to emit (possibly none) and its log-probability
    // when asked. Streams send one event per token, as OpenAI's do.
    struct Piece {
      std::string text;
      std::optional<TokenLogprob> logprob;
    };
    std::vector<Piece> pieces;
    bool done = false;
    std::string finish_reason;  // "stop" | "length" | "cancelled" | "error"
    std::string error;          // with finish_reason "error"
    size_t completion_tokens = 0;
  };

  explicit Job(JobInput input) : input_(std::move(input)) {}
  const JobInput& input() const { return input_; }

  // Waits up to `timeout` for something new; returns it, or nothing on timeout.
  std::optional<Update> take(std::chrono::milliseconds timeout);
  // From any thread: the engine drops the job at its next step.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

  // Engine side.
  std::unique_ptr<PolicyStack> take_policies() { return std::move(input_.policies); }
  void publish_prompt(std::vector<TokenLogprob> logprobs);
  void publish(const std::string& text, const TokenLogprob* logprob);
  void finish(const std::string& reason, const std::string& error = {});
  bool finished() const;

 private:
  JobInput input_;
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  Update pending_;
  bool has_news_ = false;
  bool finished_ = false;
  size_t generated_ = 0;
};

}  // namespace ts::server
