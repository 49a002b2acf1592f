#pragma once
// Runs generation jobs on N slots, each with its own KV cache, from one engine thread that owns the
// compute threads: every step advances each active slot by one call (its prompt, then one token), so
// jobs join and leave between steps and decode interleaved token by token; the rest wait in a queue.
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
#include "server/job.h"

namespace ts::server {

struct EngineOptions {
  size_t n_slots = 1;
  size_t n_ctx = 2048;
  int threads = 0;  // 0 = all cores
  size_t max_queue = 64;
  MatmulPrecision precision = MatmulPrecision::Fast;
};

struct EngineStats {
  size_t slots = 0, active = 0, queued = 0;
  size_t kv_bytes_used = 0, kv_bytes_capacity = 0;
  uint64_t prompt_tokens = 0, generated_tokens = 0, jobs_finished = 0, jobs_cancelled = 0;
  double prompt_seconds = 0, generation_seconds = 0;  // engine time spent on each
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
  void start(Slot& slot, std::shared_ptr<Job> job);
  void step(Slot& slot);
  void prefill(Slot& slot);
  void decode(Slot& slot);
  void end(Slot& slot, const std::string& reason, const std::string& error = {});

  const Model& model_;
  EngineOptions options_;
  ThreadPool pool_;
  std::vector<std::unique_ptr<Slot>> slots_;

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
