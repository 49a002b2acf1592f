#include "server/engine.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "runtime/decision_log.h"
#include "server/api_error.h"
#include "server/decisions_json.h"
#include "server/stop_matcher.h"

namespace ts::server {

struct Engine::Slot {
  Slot(const Model& model, const EngineOptions& o) : seq(model.config(), o.n_ctx) {
    seq.set_decision_log(&decisions);
  }
  Sequence seq;
  DecisionLog decisions;
  std::shared_ptr<Job> job;  // null: free
  // The prompt, then the generated tokens; the first seq.n_past() are cached (after a job, for
  // prefix reuse by the next one).
  std::vector<int32_t> tokens;
  bool dense = true;          // the cached sequence ran without policies
  std::vector<float> logits;  // of the last token, for the next draw
  std::unique_ptr<Sampler> sampler;
  std::optional<StreamingDecoder> decoder;
  StopMatcher stop;
  int generated = 0;
  size_t prompt_done = 0;            // prompt tokens cached so far
  std::vector<TokenLogprob> scored;  // echo with logprobs: the prompt's, chunk by chunk
  uint64_t order = 0;                // admission order: prompts are served first come first
  std::atomic<size_t> kv_tokens{0};  // read by stats() from other threads

  bool prefilled() const { return prompt_done == job->input().prompt.size(); }
  bool echo_logprobs() const { return job->input().params.echo && job->input().params.logprobs >= 0; }
};

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Positions of `prompt` a slot caching `cached` (its first n_past tokens) can keep: their common
// prefix, leaving at least the prompt's last token to run (its logits start the generation).
size_t reusable_prefix(std::span<const int32_t> cached, std::span<const int32_t> prompt) {
  const size_t n = std::min(cached.size(), prompt.size() - 1);
  return static_cast<size_t>(std::mismatch(cached.begin(), cached.begin() + n, prompt.begin()).first -
                             cached.begin());
}

}  // namespace

void Histogram::observe(double v) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), v) - bounds.begin());
  ++counts[i];
  sum += v;
  ++n;
}

Engine::Engine(const Model& model, const EngineOptions& options)
    : model_(model), options_(options), pool_(options.threads), pass_(model, pool_, options.precision) {
  TS_CHECK(options.n_slots >= 1, "the engine needs at least one slot");
  TS_CHECK(options.batch_tokens >= 1, "the engine needs a batch of at least one token");
  for (size_t i = 0; i < options.n_slots; ++i) slots_.push_back(std::make_unique<Slot>(model, options));
  totals_.slots = options.n_slots;
  totals_.kv_bytes_capacity = options.n_slots * options.n_ctx * slots_[0]->seq.cache().bytes_per_token();
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
  const size_t per_token = slots_[0]->seq.cache().bytes_per_token();
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
      admit(lock);
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
    step();
  }
}

void Engine::admit(std::unique_lock<std::mutex>& lock) {
  while (!queue_.empty()) {
    // Most reuse first; on a tie the slot caching the fewest positions, so a cache that a later
    // prompt may still continue is the last to be overwritten.
    Slot* best = nullptr;
    size_t best_reuse = 0;
    for (auto& slot : slots_) {
      if (slot->job) continue;
      const size_t reuse = reusable(*slot, queue_.front()->input());
      if (!best || reuse > best_reuse || (reuse == best_reuse && slot->seq.n_past() < best->seq.n_past()))
        best = slot.get(), best_reuse = reuse;
    }
    if (!best) return;
    std::shared_ptr<Job> job = std::move(queue_.front());
    queue_.pop_front();
    ++active_;
    lock.unlock();
    start(*best, std::move(job), best_reuse);
    lock.lock();
  }
}

// Reuse needs both sequences dense (a policy's state depends on the path its sequence took) and no
// prompt log-probabilities (they come from the prompt's own rows).
size_t Engine::reusable(const Slot& slot, const JobInput& input) {
  const GenerationParams& p = input.params;
  if (input.policies || !slot.dense || (p.echo && p.logprobs >= 0)) return 0;
  return reusable_prefix(std::span(slot.tokens).first(slot.seq.n_past()), input.prompt);
}

void Engine::start(Slot& slot, std::shared_ptr<Job> job, size_t reuse) {
  const GenerationParams& p = job->input().params;
  const std::vector<int32_t>& prompt = job->input().prompt;
  slot.seq.truncate(reuse);
  slot.decisions.clear();
  if (reuse == 0) {
    slot.decisions.policies.clear();  // a dense job attaches no stack to fill them
    slot.seq.set_policies(job->take_policies());
    slot.dense = slot.seq.policies() == nullptr;
  } else {
    std::lock_guard lock(mutex_);
    ++totals_.prefix_hits;
    totals_.prefix_tokens_reused += reuse;
  }
  slot.tokens = prompt;
  slot.prompt_done = reuse;
  slot.scored.clear();
  slot.sampler = std::make_unique<Sampler>(p.sampling);
  slot.decoder.emplace(model_.tokenizer());
  slot.stop = StopMatcher(p.stop);
  slot.generated = 0;
  slot.order = admitted_++;
  slot.job = std::move(job);
}

// Decode rows first (one per decoding slot, so their inter-token latency does not wait for long
// prompts), then prompt chunks in admission order within the token budget. A sequence whose
// policies rank a call's tokens together (OrthoRank, ZipVL, Token Filtering per call) gets its
// prompt as one call; when it does not fit the budget it still runs, alone among prompts.
void Engine::step() {
  const auto t0 = std::chrono::steady_clock::now();
  step_slots_.clear();
  step_rows_.clear();
  std::vector<Slot*> prompts;
  for (auto& slot : slots_) {
    if (!slot->job) continue;
    if (slot->job->cancelled()) {
      end(*slot, "cancelled");
    } else if (slot->prefilled()) {
      if (draw(*slot)) {
        step_slots_.push_back(slot.get());
        step_rows_.push_back({&slot->seq, std::span(&slot->tokens.back(), 1), 0});
      }
    } else {
      prompts.push_back(slot.get());
    }
  }
  std::sort(prompts.begin(), prompts.end(), [](const Slot* a, const Slot* b) { return a->order < b->order; });
  size_t budget = options_.batch_tokens > step_rows_.size() ? options_.batch_tokens - step_rows_.size() : 0;
  bool prompt_in_step = false;
  for (Slot* slot : prompts) {
    const std::vector<int32_t>& prompt = slot->job->input().prompt;
    const size_t left = prompt.size() - slot->prompt_done;
    size_t n = std::min(left, budget);
    if (slot->seq.ranks_whole_calls()) n = left <= budget || !prompt_in_step ? left : 0;
    if (n == 0) continue;
    const SequenceStep row{&slot->seq, std::span(prompt).subspan(slot->prompt_done, n),
                           slot->echo_logprobs() ? 0 : n - 1};
    try {
      pass_.check({&row, 1});
    } catch (const std::exception& e) {
      end(*slot, "error", e.what());
      continue;
    }
    step_slots_.push_back(slot);
    step_rows_.push_back(row);
    budget -= std::min(budget, n);
    prompt_in_step = true;
  }
  if (step_rows_.empty()) return;

  const size_t n_vocab = model_.config().n_vocab;
  try {
    pass_.run(step_rows_, [&](size_t i, size_t first_row, std::span<const float> logits) {
      Slot& slot = *step_slots_[i];
      const size_t rows = logits.size() / n_vocab;
      if (!slot.prefilled() && slot.echo_logprobs()) {
        // Row r of the chunk scores prompt token prompt_done + r + 1.
        const std::vector<int32_t>& prompt = slot.job->input().prompt;
        const size_t alternatives = size_t(slot.job->input().params.logprobs);
        if (slot.scored.empty()) {
          slot.scored.emplace_back();
          slot.scored[0].id = prompt[0];
        }
        for (size_t r = 0; r < rows; ++r) {
          const size_t next = slot.prompt_done + first_row + r + 1;
          if (next < prompt.size())
            slot.scored.push_back(
                token_logprob(logits.subspan(r * n_vocab, n_vocab), prompt[next], alternatives));
        }
      }
      const std::span<const float> last = logits.last(n_vocab);
      slot.logits.assign(last.begin(), last.end());
    });
  } catch (const std::exception& e) {
    // The step ran every slot's layers together: none of them can go on, and their caches, cut
    // mid-step, must not serve a later prompt.
    for (Slot* slot : step_slots_) {
      end(*slot, "error", e.what());
      slot->seq.truncate(0);
    }
    return;
  }
  size_t rows = 0, prompt_rows = 0;  // prompt slots are not prefilled() until after_step
  for (size_t i = 0; i < step_slots_.size(); ++i) {
    rows += step_rows_[i].tokens.size();
    if (!step_slots_[i]->prefilled()) prompt_rows += step_rows_[i].tokens.size();
    step_slots_[i]->seq.end_batch();
  }
  const double seconds = seconds_since(t0);
  {
    std::lock_guard lock(mutex_);
    totals_.prompt_seconds += seconds * double(prompt_rows) / double(rows);
    totals_.generation_seconds += seconds * double(rows - prompt_rows) / double(rows);
    totals_.prompt_tokens += prompt_rows;
    ++totals_.steps;
    totals_.batch_rows.observe(double(rows));
    totals_.batch_sequences.observe(double(step_slots_.size()));
    totals_.step_seconds.observe(seconds);
  }
  for (size_t i = 0; i < step_slots_.size(); ++i) after_step(*step_slots_[i], step_rows_[i].tokens.size());
}

void Engine::after_step(Slot& slot, size_t rows) {
  slot.kv_tokens = slot.seq.n_past();
  if (slot.prefilled()) return;  // a decode row: its token was published when drawn
  slot.prompt_done += rows;
  if (!slot.prefilled()) return;
  if (slot.echo_logprobs()) slot.job->publish_prompt(std::move(slot.scored));
  if (slot.job->input().params.max_tokens == 0) end(slot, "length");
}

bool Engine::draw(Slot& slot) {
  const GenerationParams& p = slot.job->input().params;
  const Tokenizer& tok = model_.tokenizer();
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
    } else if (slot.generated >= p.max_tokens || slot.seq.n_past() >= slot.seq.n_ctx()) {
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
  {
    std::lock_guard lock(mutex_);
    ++totals_.generated_tokens;
  }
  if (!finish.empty()) end(slot, finish);
  return finish.empty();
}

void Engine::end(Slot& slot, const std::string& reason, const std::string& error) {
  // The last token drawn was never run, so it has no decisions.
  const std::span<const int32_t> ran =
      std::span(slot.tokens).first(std::min(slot.tokens.size(), slot.seq.n_past()));
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
