#include "core/thread_pool.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>

namespace ts {

namespace {
// Waiters spin this long before sleeping: a forward pass issues a parallel region every few
// microseconds, and a futex wake-up (tens of microseconds under a hypervisor) per region would
// dominate decode. Idle pools still go to sleep after this.
constexpr auto kSpinTime = std::chrono::microseconds(2000);

// Spins until pred() holds or the spin time is over; returns pred(). Yields now and then so that
// on an oversubscribed machine the thread we wait for can have this core.
template <class Pred>
bool spin_until(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (int i = 1;; ++i) {
    if (pred()) return true;
    _mm_pause();
    if (i % 64 == 0) {
      std::this_thread::yield();
      if (std::chrono::steady_clock::now() > deadline) return pred();
    }
  }
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  try {
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
  } catch (...) {  // the system refused a thread: stop the started ones (joinable threads would terminate)
    stop_workers();
    throw;
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint32_t seen = 0;
  for (;;) {
    if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
      generation_.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = generation_.load(std::memory_order_acquire);
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
  if (spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) return;
  for (int left = pending_.load(); left != 0; left = pending_.load()) pending_.wait(left);
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t, int)>& fn,
                              size_t min_items) {
  if (n == 0) return;
  const size_t threads =
      std::min<size_t>(static_cast<size_t>(n_threads_), (n + min_items - 1) / std::max<size_t>(min_items, 1));
  if (threads == 1) {  // nothing to share: skip waking the workers
    fn(0, n, 0);
    return;
  }
  run([&](int t) {
    const auto ut = static_cast<size_t>(t);
    if (ut >= threads) return;
    const size_t begin = n * ut / threads, end = n * (ut + 1) / threads;
    fn(begin, end, t);
  });
}

}  // namespace ts
