#pragma once
// Persistent worker pool: threads are created once and woken per parallel region, so a
// forward pass issues hundreds of parallel regions without creating a thread.
//
// A region's items are cut into more chunks than threads (guided: each claim a share of what is
// left), and each thread claims the next chunk until none is left. Nothing waits for a thread
// that has not started: on a machine where another process holds a core, the threads that run
// take the share of the one that does not, and the region ends when the chunks taken are done. A
// worker that keeps arriving late naps instead of spinning on a core the caller needs. Which
// thread runs which chunk never changes a result, as long as items are independent (every
// caller's are); a shuffled schedule checks that.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace ts {

class ThreadPool {
 public:
  // Chunk boundaries, their order and the threads' pace drawn from a seed per region: for
  // tests that results do not depend on the schedule.
  struct ShuffledSchedule {
    uint64_t seed = 0;
  };

  // n_threads includes the calling thread; 0 means hardware concurrency.
  explicit ThreadPool(int n_threads);
  ThreadPool(int n_threads, ShuffledSchedule shuffled);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // fn(begin, end, thread_index) over chunks covering [0, n) once; the caller is thread 0, and a
  // thread runs its chunks one after another (per-thread scratch indexed by thread_index is
  // safe). A chunk has at least min_items items (unless n is smaller), so work too small to pay
  // for waking the workers runs inline on the caller. An exception from fn stops the chunks not
  // yet started and is rethrown on the caller once the others are done (the first, if several).
  // One region at a time: not re-entrant, not for two calling threads at once.
  void parallel_for(size_t n, const std::function<void(size_t, size_t, int)>& fn, size_t min_items = 1);

 private:
  using ChunkFn = std::function<void(size_t, size_t, int)>;
  void stop_workers();
  void worker_loop(int index);
  // A worker's entry to the open region (false: the gate is closed) and its exit.
  bool enter_region();
  void leave_region();
  // The next chunk of the open region: false when none is left.
  bool claim(size_t& begin, size_t& end);
  // Claims and runs chunks of the open region until none is left.
  void run_chunks(int index);
  // No chunk of the open region starts after this.
  void abandon_region();
  // Closes the gate and waits for the workers inside to leave.
  void close_and_wait();
  // The shuffled schedule's cut of [0, n): random boundaries in a random order.
  void shuffle_chunks(size_t n);

  int n_threads_;
  std::vector<std::thread> workers_;

  // The open region, written by the caller while the gate is closed.
  const ChunkFn* fn_ = nullptr;
  size_t n_ = 0, smallest_chunk_ = 1;

  // Each on its own cache line: workers spin on generation_ while the threads claim chunks.
  // next_: the first item not yet claimed (the next chunk's index under a shuffled schedule).
  alignas(64) std::atomic<size_t> next_{0};
  // Gate: kClosed | the number of workers inside the region. A worker enters only while it is
  // open; the caller closes it when every chunk is claimed and waits for those inside to leave.
  static constexpr uint32_t kClosed = 1u << 31;
  alignas(64) std::atomic<uint32_t> gate_{kClosed};
  alignas(64) std::atomic<uint32_t> generation_{0};  // bumped per region: wakes sleeping workers
  std::exception_ptr worker_error_;                  // a worker's exception, rethrown by the caller
  std::atomic<bool> worker_failed_{false};
  std::atomic<int64_t> opened_at_{0};  // steady-clock ns: when the last region opened
  std::atomic<bool> stop_{false};

  // Shuffled schedule (tests only): seed, region count, and the region's cut and order.
  uint64_t shuffle_seed_ = 0, regions_ = 0;
  std::vector<size_t> cuts_, order_;
};

// fn over [0, n) on `pool`, or in one call on the caller (thread 0) when there is none (a policy
// driven without the forward pass's threads, as in unit tests).
inline void parallel_for(ThreadPool* pool, size_t n, const std::function<void(size_t, size_t, int)>& fn) {
  if (pool)
    pool->parallel_for(n, fn);
  else if (n > 0)
    fn(0, n, 0);
}

}  // namespace ts
