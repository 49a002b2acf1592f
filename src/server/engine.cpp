#include "server/engine.h"

#include <chrono>
#include <optional>

#include "runtime/decision_log.h"
#include "runtime/transformer.h"
#include "server/api_error.h"
#include "server/decisions_json.h"
#include "server/stop_matcher.h"

namespace ts::server {

struct Engine::Slot {
  Slot(const Model& model, ThreadPool& pool, const EngineOptions& o) : tf(model, pool, o.n_ctx, o.precision) {
    tf.set_decision_log(&decisions);
  }
  Transformer tf;
  DecisionLog decisions;
  std::shared_ptr<Job> job;  // null: free
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // of the last token, for the next draw
  std::unique_ptr<Sampler> sampler;
  std::optional<StreamingDecoder> decoder;
  StopMatcher stop;
  int generated = 0;
  bool prefilled = false;
  std::atomic<size_t> kv_tokens{0};  // read by stats() from other threads
};

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Engine::Engine(const Model& model, const EngineOptions& options)
    : model_(model), options_(options), pool_(options.threads) {
  TS_CHECK(options.n_slots >= 1, "the engine needs at least one slot");
  for (size_t i = 0; i < options.n_slots; ++i)
    slots_.push_back(std::make_unique<Slot>(model, pool_, options));
  totals_.slots = options.n_slots;
  totals_.kv_bytes_capacity = options.n_slots * options.n_ctx * slots_[0]->tf.cache().bytes_per_token();
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() { shutdown(std::chrono::milliseconds(0)); }

std::shared_ptr<Job> Engine::submit(JobInput input) {
  auto job = std::make_shared<Job>(std::move(input));
  {
    std::lock_guard lock(mutex_);
    if (!accepting_) throw ApiError(503, "the server is shutting down", "server_error");
    if (queue_.size() >= options_.max_queue)
      throw ApiError(503, cat("the server is busy (", queue_.size(), " requests queued); retry later"),
                     "server_error");
    queue_.push_back(job);
  }
  wake_.notify_one();
  return job;
}

void Engine::shutdown(std::chrono::milliseconds grace) {
  std::unique_lock lock(mutex_);
  if (!thread_.joinable()) return;
  accepting_ = false;
  drained_.wait_for(lock, grace, [&] { return queue_.empty() && active_ == 0; });
  for (const auto& job : queue_) job->cancel();
  for (const auto& slot : slots_)
    if (slot->job) slot->job->cancel();
  stopping_ = true;
  lock.unlock();
  wake_.notify_one();
  thread_.join();
}

EngineStats Engine::stats() const {
  std::lock_guard lock(mutex_);
  EngineStats s = totals_;
  s.active = active_;
  s.queued = queue_.size();
  const size_t per_token = slots_[0]->tf.cache().bytes_per_token();
  for (const auto& slot : slots_) s.kv_bytes_used += slot->kv_tokens * per_token;
  return s;
}

nlohmann::json Engine::last_decisions() const {
  std::lock_guard lock(mutex_);
  return last_decisions_;
}

void Engine::loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      for (auto& slot : slots_) {
        if (slot->job || queue_.empty()) continue;
        std::shared_ptr<Job> job = std::move(queue_.front());
        queue_.pop_front();
        ++active_;
        lock.unlock();
        start(*slot, std::move(job));
        lock.lock();
      }
      if (active_ == 0) {
        // Cancelled queued jobs still get their final update.
        if (stopping_) {
          for (const auto& job : queue_) job->finish("cancelled");
          queue_.clear();
          return;
        }
        drained_.notify_all();
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        continue;
      }
    }
    for (auto& slot : slots_)
      if (slot->job) step(*slot);
  }
}

void Engine::start(Slot& slot, std::shared_ptr<Job> job) {
  slot.tf.truncate(0);
  slot.decisions.clear();
  slot.decisions.policies.clear();  // a dense job attaches no stack to fill them
  slot.tf.set_policies(job->take_policies());
  const GenerationParams& p = job->input().params;
  slot.tokens = job->input().prompt;
  slot.sampler = std::make_unique<Sampler>(p.sampling);
  slot.decoder.emplace(model_.tokenizer());
  slot.stop = StopMatcher(p.stop);
  slot.generated = 0;
  slot.prefilled = false;
  slot.job = std::move(job);
}

void Engine::step(Slot& slot) {
  if (slot.job->cancelled()) return end(slot, "cancelled");
  try {
    if (!slot.prefilled) {
      prefill(slot);
    } else {
      decode(slot);
    }
  } catch (const std::exception& e) {
    end(slot, "error", e.what());
  }
}

void Engine::prefill(Slot& slot) {
  const GenerationParams& p = slot.job->input().params;
  const std::vector<int32_t>& prompt = slot.job->input().prompt;
  const size_t n_vocab = model_.config().n_vocab;
  const auto t0 = std::chrono::steady_clock::now();
  if (p.echo && p.logprobs >= 0) {
    // Every row's logits: row r scores prompt token r + 1; the last row predicts the first new token.
    std::vector<TokenLogprob> scored(prompt.size());
    scored[0].id = prompt[0];
    slot.tf.forward_logits(prompt, 0, [&](size_t first_row, std::span<const float> logits) {
      for (size_t r = 0; r < logits.size() / n_vocab; ++r) {
        const std::span<const float> row = logits.subspan(r * n_vocab, n_vocab);
        const size_t pos = first_row + r;
        if (pos + 1 < prompt.size()) {
          scored[pos + 1] = token_logprob(row, prompt[pos + 1], size_t(p.logprobs));
        } else {
          slot.logits.assign(row.begin(), row.end());
        }
      }
    });
    slot.job->publish_prompt(std::move(scored));
  } else {
    const std::span<const float> logits = slot.tf.forward(prompt, false);
    slot.logits.assign(logits.begin(), logits.end());
  }
  slot.prefilled = true;
  slot.kv_tokens = slot.tf.n_past();
  {
    std::lock_guard lock(mutex_);
    totals_.prompt_tokens += prompt.size();
    totals_.prompt_seconds += seconds_since(t0);
  }
  if (p.max_tokens == 0) end(slot, "length");
}

void Engine::decode(Slot& slot) {
  const GenerationParams& p = slot.job->input().params;
  const Tokenizer& tok = model_.tokenizer();
  const auto t0 = std::chrono::steady_clock::now();
  const int32_t next = slot.sampler->sample(slot.logits, slot.tokens);
  ++slot.generated;
  // What the decoder and the stop matcher still hold, when generation ends.
  const auto tail = [&] {
    std::string t = slot.stop.push(slot.decoder->flush());
    return slot.stop.stopped() ? t : t + slot.stop.flush();
  };
  std::string text, finish;
  if (!p.ignore_eos && tok.is_end_of_generation(next)) {
    finish = "stop";
    text = tail();
  } else {
    slot.tokens.push_back(next);
    text = slot.stop.push(slot.decoder->push(next));
    if (slot.stop.stopped()) {
      finish = "stop";
    } else if (slot.generated >= p.max_tokens || slot.tf.n_past() >= slot.tf.n_ctx()) {
      finish = "length";
      text += tail();
    }
  }
  // An end-of-generation token adds no text but is reported with its log-probability, as vLLM does
  // (lm-eval's local-completions expects one entry for the generated token).
  if (p.logprobs >= 0) {
    const TokenLogprob lp = token_logprob(slot.logits, next, size_t(p.logprobs));
    slot.job->publish(text, &lp);
  } else {
    slot.job->publish(text, nullptr);
  }
  if (finish.empty()) {
    const std::span<const float> logits = slot.tf.forward(std::span(&slot.tokens.back(), 1), false);
    slot.logits.assign(logits.begin(), logits.end());
    slot.kv_tokens = slot.tf.n_past();
  }
  {
    std::lock_guard lock(mutex_);
    ++totals_.generated_tokens;
    totals_.generation_seconds += seconds_since(t0);
  }
  if (!finish.empty()) end(slot, finish);
}

void Engine::end(Slot& slot, const std::string& reason, const std::string& error) {
  // The last token drawn was never run, so it has no decisions.
  const std::span<const int32_t> ran =
      std::span(slot.tokens).first(std::min(slot.tokens.size(), slot.tf.n_past()));
  nlohmann::json decisions = decisions_json(slot.decisions, ran, model_, slot.job->input().request_id);
  std::shared_ptr<Job> job = std::move(slot.job);
  slot.kv_tokens = 0;
  {
    // Counted before the job is seen finished, so stats() never lags behind a finished job.
    std::lock_guard lock(mutex_);
    --active_;
    ++totals_.jobs_finished;
    if (reason == "cancelled") ++totals_.jobs_cancelled;
    last_decisions_ = std::move(decisions);
  }
  job->finish(reason, error);
}

}  // namespace ts::server
