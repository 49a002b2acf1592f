#include "server/job.h"

namespace ts::server {

std::optional<Job::Update> Job::take(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!changed_.wait_for(lock, timeout, [&] { return has_news_; })) return std::nullopt;
  Update out = std::move(pending_);
  pending_ = Update{};
  has_news_ = false;
  return out;
}

void Job::publish_prompt(std::vector<TokenLogprob> logprobs) {
  std::lock_guard lock(mutex_);
  pending_.prompt_logprobs = std::move(logprobs);
  has_news_ = true;
  changed_.notify_all();
}

void Job::publish(const std::string& text, const TokenLogprob* logprob) {
  std::lock_guard lock(mutex_);
  pending_.pieces.push_back({text, logprob ? std::optional(*logprob) : std::nullopt});
  pending_.completion_tokens = ++generated_;
  has_news_ = true;
  changed_.notify_all();
}

void Job::finish(const std::string& reason, const std::string& error) {
  std::lock_guard lock(mutex_);
  pending_.done = true;
  pending_.finish_reason = reason;
  pending_.error = error;
  pending_.completion_tokens = generated_;
  finished_ = true;
  has_news_ = true;
  changed_.notify_all();
}

bool Job::finished() const {
  std::lock_guard lock(mutex_);
  return finished_;
}

}  // namespace ts::server
