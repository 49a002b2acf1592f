#include "core/thread_pool.h"

#include <algorithm>

namespace ts {

namespace {
// Workers spin briefly before sleeping: decode issues a parallel region every few
// microseconds, and a futex round trip per region would dominate small ops.
constexpr int kSpinIterations = 20000;
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kSpinIterations; ++spin) {
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = gen;
    if (stop_.load()) return;
    (*job_)(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void ThreadPool::run(const std::function<void(int)>& fn) {
  if (n_threads_ == 1) {
    fn(0);
    return;
  }
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  fn(0);
  for (int spin = 0; spin < kSpinIterations; ++spin) {
    if (pending_.load(std::memory_order_acquire) == 0) return;
  }
  for (int left = pending_.load(); left != 0; left = pending_.load()) pending_.wait(left);
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t, int)>& fn) {
  if (n == 0) return;
  const size_t threads = std::min<size_t>(static_cast<size_t>(n_threads_), n);
  run([&](int t) {
    const auto ut = static_cast<size_t>(t);
    if (ut >= threads) return;
    const size_t begin = n * ut / threads, end = n * (ut + 1) / threads;
    fn(begin, end, t);
  });
}

}  // namespace ts
