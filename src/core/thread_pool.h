#pragma once
// Persistent worker pool: threads are created once and woken per parallel region, so a
// forward pass issues hundreds of parallel ops without creating a thread.
#include <atomic>
#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

namespace ts {

class ThreadPool {
 public:
  // n_threads includes the calling thread; 0 means hardware concurrency.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(thread_index) on every thread (caller is thread 0) and returns when all are done.
  void run(const std::function<void(int)>& fn);

  // Splits [0, n) into contiguous chunks, one per thread: fn(begin, end, thread_index). Each
  // thread gets at least min_items items, so work too small to pay for waking the workers runs
  // inline on the caller.
  void parallel_for(size_t n, const std::function<void(size_t, size_t, int)>& fn, size_t min_items = 1);

 private:
  void stop_workers();
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint32_t> generation_{0};  // 32-bit so wait/notify map to a futex
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace ts
