#pragma once
// Runs generation jobs on N slots, each with its own sequence (KV cache, policies, decision log),
// from one engine thread that owns the compute threads. Every step is one batched forward pass
// over all busy slots (continuous batching): each decoding slot's next token, plus prompt chunks
// of starting slots up to a token budget, so the weights are read once per step however many
// slots run. Jobs join and leave between steps; the rest wait in a queue. A new dense prompt that
// starts with tokens an idle slot still caches reuses them (prefix reuse).
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"
#include "runtime/forward_pass.h"
#include "server/job.h"

namespace ts::server {

struct EngineOptions {
  size_t n_slots = 1;
  size_t batch_tokens = 512;  // rows per step: decode tokens first, then prompt chunks
  size_t n_ctx = 2048;
  int threads = 0;  // 0 = all cores
  size_t max_queue = 64;
  MatmulPrecision precision = MatmulPrecision::Fast;
};

// Prometheus-style histogram: counts of observations <= each bound, their sum and number.
struct Histogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // per bound, not cumulative; plus one for +Inf
  double sum = 0;
  uint64_t n = 0;
  explicit Histogram(std::vector<double> b = {}) : bounds(std::move(b)), counts(bounds.size() + 1, 0) {}
  void observe(double v);
};

struct EngineStats {
  size_t slots = 0, active = 0, queued = 0;
  size_t kv_bytes_used = 0, kv_bytes_capacity = 0;
  uint64_t prompt_tokens = 0, generated_tokens = 0, jobs_finished = 0, jobs_cancelled = 0;
  double prompt_seconds = 0, generation_seconds = 0;   // engine time, a step's shared by its rows
  uint64_t prefix_hits = 0, prefix_tokens_reused = 0;  // prompts that reused an idle slot's cache
  uint64_t steps = 0;
  Histogram batch_rows{{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}};  // rows per step
  Histogram batch_sequences{{1, 2, 4, 8, 16, 32, 64}};                  // slots per step
  Histogram step_seconds{{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}};
};

class Engine {
 public:
  Engine(const Model& model, const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a job; throws ApiError 503 when the queue is full or the engine is shutting down.
  std::shared_ptr<Job> submit(JobInput input);
  // Stops taking jobs, lets the queued and running ones finish for up to `grace`, cancels the rest
  // and stops the engine thread.
  void shutdown(std::chrono::milliseconds grace);

  EngineStats stats() const;
  size_t n_ctx() const { return options_.n_ctx; }
  // The policies' decisions during the most recently finished job, as decisions_json() gives them.
  nlohmann::json last_decisions() const;

 private:
  struct Slot;
  void loop();
  // Under the lock: queued jobs into free slots, each to the slot caching most of its prompt (on a
  // tie, the one caching least).
  void admit(std::unique_lock<std::mutex>& lock);
  // Positions of the job's prompt that the slot's cached sequence can keep (prefix reuse).
  static size_t reusable(const Slot& slot, const JobInput& input);
  void start(Slot& slot, std::shared_ptr<Job> job, size_t reuse);
  // One batched forward pass over every busy slot.
  void step();
  // Draws a decoding slot's next token from its logits and publishes it; false: the job ended.
  bool draw(Slot& slot);
  void after_step(Slot& slot, size_t rows);
  void end(Slot& slot, const std::string& reason, const std::string& error = {});

  const Model& model_;
  EngineOptions options_;
  ThreadPool pool_;
  ForwardPass pass_;
  std::vector<std::unique_ptr<Slot>> slots_;
  uint64_t admitted_ = 0;
  // The current step: its slots, and their rows in order.
  std::vector<Slot*> step_slots_;
  std::vector<SequenceStep> step_rows_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;     // the engine thread: new job or stop
  std::condition_variable drained_;  // shutdown(): nothing queued or running
  std::deque<std::shared_ptr<Job>> queue_;
  size_t active_ = 0;
  bool accepting_ = true, stopping_ = false;
  EngineStats totals_;
  nlohmann::json last_decisions_;
  std::thread thread_;
};

}  // namespace ts::server
