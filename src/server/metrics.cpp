#include "server/metrics.h"

#include <sstream>

namespace ts::server {

void RequestCounts::add(const std::string& route, int status) {
  std::lock_guard lock(mutex_);
  ++counts_[{route, status}];
}

std::map<std::pair<std::string, int>, uint64_t> RequestCounts::snapshot() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

std::string prometheus_text(const RequestCounts& requests, const EngineStats& e) {
  std::ostringstream out;
  out.precision(15);  // counters stay exact
  const auto metric = [&](const char* name, const char* type, const char* help, double value) {
    out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n'
        << name << ' ' << value << '\n';
  };
  out << "# HELP tokensieve_requests_total HTTP requests answered, by route and status.\n"
         "# TYPE tokensieve_requests_total counter\n";
  for (const auto& [key, n] : requests.snapshot())
    out << "tokensieve_requests_total{route=\"" << key.first << "\",status=\"" << key.second << "\"} " << n
        << '\n';
  metric("tokensieve_prompt_tokens_total", "counter", "Prompt tokens processed.", double(e.prompt_tokens));
  metric("tokensieve_generated_tokens_total", "counter", "Tokens generated.", double(e.generated_tokens));
  metric("tokensieve_prompt_tokens_per_second", "gauge",
         "Prompt tokens per second of engine time, since start.",
         e.prompt_seconds > 0 ? double(e.prompt_tokens) / e.prompt_seconds : 0.0);
  metric("tokensieve_generation_tokens_per_second", "gauge",
         "Generated tokens per second of engine time, since start (slots interleave, so this is the engine's "
         "rate).",
         e.generation_seconds > 0 ? double(e.generated_tokens) / e.generation_seconds : 0.0);
  metric("tokensieve_jobs_finished_total", "counter", "Generation jobs finished (one per prompt).",
         double(e.jobs_finished));
  metric("tokensieve_jobs_cancelled_total", "counter", "Jobs cancelled (client gone or shutdown).",
         double(e.jobs_cancelled));
  metric("tokensieve_kv_cache_bytes", "gauge", "KV cache bytes holding live positions.",
         double(e.kv_bytes_used));
  metric("tokensieve_kv_cache_capacity_bytes", "gauge", "KV cache bytes allocated over all slots.",
         double(e.kv_bytes_capacity));
  metric("tokensieve_queue_depth", "gauge", "Jobs waiting for a slot.", double(e.queued));
  metric("tokensieve_slots_active", "gauge", "Slots running a job.", double(e.active));
  metric("tokensieve_slots", "gauge", "Slots (jobs that run at once).", double(e.slots));
  metric("tokensieve_prefix_hits_total", "counter", "Prompts that reused tokens an idle slot still cached.",
         double(e.prefix_hits));
  metric("tokensieve_prefix_tokens_reused_total", "counter",
         "Prompt tokens taken from a cache, not prefilled.", double(e.prefix_tokens_reused));
  metric("tokensieve_steps_total", "counter", "Batched forward passes (engine steps).", double(e.steps));
  const auto histogram = [&](const char* name, const char* help, const Histogram& h) {
    out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " histogram\n";
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds.size(); ++i) {
      cumulative += h.counts[i];
      out << name << "_bucket{le=\"" << h.bounds[i] << "\"} " << cumulative << '\n';
    }
    out << name << "_bucket{le=\"+Inf\"} " << h.n << '\n'
        << name << "_sum " << h.sum << '\n'
        << name << "_count " << h.n << '\n';
  };
  histogram("tokensieve_batch_rows", "Tokens (rows) per engine step: decode tokens plus prompt chunks.",
            e.batch_rows);
  histogram("tokensieve_batch_sequences", "Sequences (slots) per engine step.", e.batch_sequences);
  histogram("tokensieve_step_seconds", "Wall time of one engine step (one batched forward pass).",
            e.step_seconds);
  return out.str();
}

}  // namespace ts::server
