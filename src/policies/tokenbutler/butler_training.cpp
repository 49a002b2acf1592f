#include "policies/tokenbutler/butler_training.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>

#include "core/error.h"
#include "model/model.h"

namespace ts {

ButlerTrainer::ButlerTrainer(const Model& model, ThreadPool& pool, const ButlerConfig& config,
                             ButlerTrainOptions options, std::vector<std::vector<int32_t>> chunks)
    : options_(options),
      pool_(pool),
      chunks_(std::move(chunks)),
      llm_(model, pool, chunks_.empty() ? 1 : chunks_.front().size()),
      weights_(ButlerWeights::init(config, options.seed)),
      grad_(ButlerWeights::zeros(config)) {
  TS_CHECK(!chunks_.empty() && options_.steps > 0, "train-butler: no training chunks or steps");
  auto capture = std::make_unique<AttentionCapture>(config.first_layer);
  capture_ = capture.get();
  std::vector<std::unique_ptr<Policy>> policies;
  policies.push_back(std::move(capture));
  llm_.set_policies(std::make_unique<PolicyStack>(std::move(policies), model));
  weights_.for_each([&](const char*, size_t rows, size_t cols, const std::vector<float>&) {
    adam_.m.emplace_back(rows * cols, 0.0f);
    adam_.v.emplace_back(rows * cols, 0.0f);
  });
}

// Epoch e visits every chunk once in an order fixed by (seed, e).
const std::vector<int32_t>& ButlerTrainer::chunk_of(size_t step) const {
  const size_t n = chunks_.size(), epoch = step / n;
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937_64 rng(options_.seed * 1000003u + epoch);
  std::shuffle(order.begin(), order.end(), rng);
  return chunks_[order[step % n]];
}

// HF get_cosine_schedule_with_warmup, as the authors' code.
double ButlerTrainer::lr_at(size_t step) const {
  const double warm = std::floor(options_.warmup * static_cast<double>(options_.steps));
  const double s = static_cast<double>(step);
  if (s < warm) return options_.lr * s / std::max(1.0, warm);
  const double progress = (s - warm) / std::max(1.0, static_cast<double>(options_.steps) - warm);
  return options_.lr * std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * progress)));
}

double ButlerTrainer::step() {
  const std::vector<int32_t>& tokens = chunk_of(step_);
  run_with_capture(llm_, tokens);
  const ButlerConfig& c = weights_.config;
  ButlerNet net(weights_, ops());
  ButlerCache cache;
  ButlerActs acts;
  net.forward(capture_->input().data(), tokens.size(), cache, acts);
  std::vector<float> d_q(acts.q_imp.size()), d_k(acts.k_imp.size());
  const std::vector<uint32_t> rows =
      loss_rows(tokens.size(), options_.loss_rows, options_.seed * 1000003u + 7919u * step_ + 1);
  const double loss = butler_mse(c, llm_, *capture_, acts, rows, pool_, d_q.data(), d_k.data());
  grad_.for_each(
      [](const char*, size_t, size_t, std::vector<float>& t) { std::fill(t.begin(), t.end(), 0.0f); });
  net.backward(capture_->input().data(), cache, acts, d_q.data(), d_k.data(), grad_);

  double sq = 0.0;
  grad_.for_each([&](const char*, size_t, size_t, const std::vector<float>& t) {
    for (float g : t) sq += double(g) * g;
  });
  grad_norm_ = std::sqrt(sq);
  const double lr = lr_at(step_);
  ++step_;
  if (!std::isfinite(grad_norm_) || grad_norm_ > options_.skip_above)
    return loss;  // the schedule still moves
  const float clip = grad_norm_ > options_.clip ? static_cast<float>(options_.clip / grad_norm_) : 1.0f;
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  const double c1 = 1.0 - std::pow(b1, double(step_)), c2 = 1.0 - std::pow(b2, double(step_));
  // Parallel walk of weights, gradients and moments (same for_each order).
  std::vector<std::vector<float>*> ws, gs;
  weights_.for_each([&](const char*, size_t, size_t, std::vector<float>& w) { ws.push_back(&w); });
  grad_.for_each([&](const char*, size_t, size_t, std::vector<float>& g) { gs.push_back(&g); });
  for (size_t t = 0; t < ws.size(); ++t) {
    std::vector<float>& w = *ws[t];
    const std::vector<float>& g = *gs[t];
    std::vector<float>& m = adam_.m[t];
    std::vector<float>& v = adam_.v[t];
    for (size_t j = 0; j < w.size(); ++j) {
      const double gj = double(g[j]) * clip;
      m[j] = static_cast<float>(b1 * m[j] + (1 - b1) * gj);
      v[j] = static_cast<float>(b2 * v[j] + (1 - b2) * gj * gj);
      const double update = (m[j] / c1) / (std::sqrt(v[j] / c2) + eps);
      w[j] = static_cast<float>(w[j] * (1.0 - lr * options_.weight_decay) - lr * update);
    }
  }
  return loss;
}

void ButlerTrainer::save_checkpoint(const std::string& path,
                                    const std::map<std::string, std::string>& metadata) const {
  ButlerFile f{weights_, metadata, {}};
  f.metadata["step"] = std::to_string(step_);
  f.metadata["steps"] = std::to_string(options_.steps);
  size_t t = 0;
  weights_.for_each([&](const char* name, size_t, size_t, const std::vector<float>&) {
    f.extra[std::string("adam_m.") + name] = adam_.m[t];
    f.extra[std::string("adam_v.") + name] = adam_.v[t];
    ++t;
  });
  save_butler(path, f, false);
}

namespace {
void check_same_config(const ButlerConfig& a, const ButlerConfig& b, const std::string& path) {
  TS_CHECK(a.n_embd == b.n_embd && a.n_layers == b.n_layers && a.imp_dim == b.imp_dim && a.inter == b.inter &&
               a.n_query_heads == b.n_query_heads && a.first_layer == b.first_layer,
           path, ": predictor config differs from this run's");
}
}  // namespace

void ButlerTrainer::start_from(const std::string& path) {
  TS_CHECK(step_ == 0, "train-butler: a run starts from a predictor only at step 0");
  ButlerFile f = load_butler(path);
  check_same_config(f.weights.config, weights_.config, path);
  weights_ = std::move(f.weights);
}

void ButlerTrainer::resume(const std::string& path, bool reschedule) {
  ButlerFile f = load_butler(path);
  check_same_config(f.weights.config, weights_.config, path);
  TS_CHECK(f.metadata.count("step") && (reschedule || f.metadata["steps"] == std::to_string(options_.steps)),
           path, ": checkpoint is not of a run with ", options_.steps, " steps");
  weights_ = std::move(f.weights);
  size_t t = 0;
  weights_.for_each([&](const char* name, size_t, size_t, const std::vector<float>& w) {
    adam_.m[t] = f.extra.at(std::string("adam_m.") + name);
    adam_.v[t] = f.extra.at(std::string("adam_v.") + name);
    TS_CHECK(adam_.m[t].size() == w.size() && adam_.v[t].size() == w.size(), path, ": optimizer state of ",
             name, " has the wrong size");
    ++t;
  });
  step_ = std::stoul(f.metadata["step"]);
  TS_CHECK(step_ < options_.steps, path, ": checkpoint step ", step_, " is past this run's ", options_.steps,
           " steps");
}

}  // namespace ts
