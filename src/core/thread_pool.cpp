#include "core/thread_pool.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

namespace ts {

namespace {
// An idle worker spins this long for the next region before sleeping: a forward pass opens a
// region every few microseconds, and waking a sleeping worker (tens of microseconds under a
// hypervisor) would make it join late. Idle pools still go to sleep after this.
constexpr auto kIdleSpin = std::chrono::microseconds(2000);
// The caller, its chunks done, spins this long for the workers still inside before sleeping:
// long enough for a chunk that is running, short enough that a worker the system has taken off
// its core gets this one back soon.
constexpr auto kJoinSpin = std::chrono::microseconds(50);
// Guided chunks: each claim takes 1/threads of the items left, but no less than 1/(4 threads) of
// the region: a few claims per thread (each one a cache line passed between cores), and last
// chunks small enough to even out the threads' finishing times.
constexpr size_t kSmallestShare = 4;
// A worker that reaches kLateStreak regions in a row this long after they opened (or after they
// closed) is not getting a core of its own: it shares the caller's, or waits behind another
// process. Its spinning would only slow the caller, so it naps, longer each time it is late again.
constexpr auto kLate = std::chrono::nanoseconds(std::chrono::microseconds(50));
constexpr int kLateStreak = 3;
constexpr auto kFirstNap = std::chrono::microseconds(200), kLongestNap = std::chrono::microseconds(20000);

int64_t now_ns() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

// Spins until pred() holds or `time` is over; returns pred(). Yields now and then so that on an
// oversubscribed machine the thread we wait for can have this core.
template <class Pred>
bool spin_until(Pred pred, std::chrono::microseconds time) {
  const auto deadline = std::chrono::steady_clock::now() + time;
  for (int i = 1;; ++i) {
    if (pred()) return true;
    _mm_pause();
    if (i % 64 == 0) {
      std::this_thread::yield();
      if (std::chrono::steady_clock::now() > deadline) return pred();
    }
  }
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : ThreadPool(n_threads, ShuffledSchedule{}) {}

ThreadPool::ThreadPool(int n_threads, ShuffledSchedule shuffled) : shuffle_seed_(shuffled.seed) {
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
  int late = 0;
  auto nap = kFirstNap;
  for (;;) {
    if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; }, kIdleSpin)) {
      generation_.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    const bool entered = enter_region();
    if (entered && now_ns() - opened_at_.load(std::memory_order_relaxed) <= kLate.count()) {
      late = 0, nap = kFirstNap;
    } else if (++late >= kLateStreak) {
      late = 0;
      if (entered) leave_region();
      std::this_thread::sleep_for(nap);
      nap = std::min(2 * nap, kLongestNap);
      continue;
    }
    if (!entered) continue;
    try {
      run_chunks(index);
    } catch (...) {  // the caller rethrows the first one after the region
      abandon_region();
      if (!worker_failed_.exchange(true)) worker_error_ = std::current_exception();
    }
    leave_region();
  }
}

// Enters only an open region: one already closed may be done, its function gone.
bool ThreadPool::enter_region() {
  uint32_t gate = gate_.load(std::memory_order_relaxed);
  while (!(gate & kClosed)) {
    if (gate_.compare_exchange_weak(gate, gate + 1, std::memory_order_acquire, std::memory_order_relaxed))
      return true;
  }
  return false;
}

void ThreadPool::leave_region() {
  if (gate_.fetch_sub(1, std::memory_order_release) == (kClosed | 1)) gate_.notify_one();
}

bool ThreadPool::claim(size_t& begin, size_t& end) {
  if (shuffle_seed_) {
    const size_t c = next_.fetch_add(1, std::memory_order_relaxed);
    if (c >= order_.size()) return false;
    begin = cuts_[order_[c]], end = cuts_[order_[c] + 1];
    return true;
  }
  size_t at = next_.load(std::memory_order_relaxed);
  while (at < n_) {
    const size_t left = n_ - at;
    size_t take = std::min(left, std::max(smallest_chunk_, left / static_cast<size_t>(n_threads_)));
    if (left - take < smallest_chunk_) take = left;  // no tail smaller than a chunk
    if (next_.compare_exchange_weak(at, at + take, std::memory_order_relaxed)) {
      begin = at, end = at + take;
      return true;
    }
  }
  return false;
}

void ThreadPool::run_chunks(int index) {
  size_t begin = 0, end = 0;
  for (size_t claims = 0; claim(begin, end); ++claims) {
    (*fn_)(begin, end, index);
    if (shuffle_seed_ && (claims + static_cast<size_t>(index) + regions_) % 3 == 0) std::this_thread::yield();
  }
}

void ThreadPool::shuffle_chunks(size_t n) {
  uint64_t state = shuffle_seed_ ^ (++regions_ * 0xd1b54a32d192ed03ull);
  const size_t n_chunks = 1 + splitmix64(state) % std::min<size_t>(n, 8 * static_cast<size_t>(n_threads_));
  cuts_ = {0, n};
  while (cuts_.size() < n_chunks + 1) {
    cuts_.push_back(1 + splitmix64(state) % (n - 1));
    std::sort(cuts_.begin(), cuts_.end());
    cuts_.erase(std::unique(cuts_.begin(), cuts_.end()), cuts_.end());
  }
  order_.resize(n_chunks);
  for (size_t c = 0; c < n_chunks; ++c) order_[c] = c;
  for (size_t c = n_chunks; c > 1; --c) std::swap(order_[c - 1], order_[splitmix64(state) % c]);
}

void ThreadPool::parallel_for(size_t n, const ChunkFn& fn, size_t min_items) {
  if (n == 0) return;
  min_items = std::max<size_t>(min_items, 1);
  if (shuffle_seed_) {
    shuffle_chunks(n);                             // ignores min_items: any cut must give the same result
  } else if (n_threads_ == 1 || n <= min_items) {  // nothing to share: skip waking the workers
    fn(0, n, 0);
    return;
  }
  fn_ = &fn;
  n_ = n;
  smallest_chunk_ = std::max(min_items, n / (kSmallestShare * static_cast<size_t>(n_threads_)));
  next_.store(0, std::memory_order_relaxed);
  if (n_threads_ > 1) {
    opened_at_.store(now_ns(), std::memory_order_relaxed);
    gate_.store(0, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
  }
  try {
    run_chunks(0);
  } catch (...) {
    // fn_ and what it captures end with this frame: no chunk may start after it.
    abandon_region();
    close_and_wait();
    worker_error_ = nullptr, worker_failed_ = false;
    throw;
  }
  close_and_wait();
  if (worker_error_) {
    worker_failed_ = false;
    std::rethrow_exception(std::exchange(worker_error_, nullptr));
  }
}

void ThreadPool::abandon_region() {
  next_.store(shuffle_seed_ ? order_.size() : n_, std::memory_order_relaxed);
}

void ThreadPool::close_and_wait() {
  if (n_threads_ == 1) return;
  if ((gate_.fetch_or(kClosed, std::memory_order_acq_rel) & ~kClosed) == 0) return;
  if (spin_until([&] { return gate_.load(std::memory_order_acquire) == kClosed; }, kJoinSpin)) return;
  for (uint32_t g = gate_.load(std::memory_order_acquire); g != kClosed;
       g = gate_.load(std::memory_order_acquire))
    gate_.wait(g, std::memory_order_acquire);
}

}  // namespace ts
