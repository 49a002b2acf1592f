#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace ts {
namespace {

// Every index once, in chunks that do not overlap, for ordinary and shuffled schedules.
TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  for (uint64_t seed : {0u, 1u, 7u}) {
    for (int threads : {1, 2, 3, 8}) {
      ThreadPool pool(threads, {seed});
      for (size_t n : {0u, 1u, 2u, 5u, 1000u}) {
        for (size_t min_items : {1u, 3u, 400u}) {
          std::vector<std::atomic<int>> hits(n);
          pool.parallel_for(
              n,
              [&](size_t b, size_t e, int t) {
                ASSERT_LT(b, e);
                ASSERT_LE(e, n);
                ASSERT_LT(t, threads);
                for (size_t i = b; i < e; ++i) hits[i]++;
              },
              min_items);
          for (size_t i = 0; i < n; ++i)
            ASSERT_EQ(hits[i].load(), 1) << threads << " threads, n=" << n << ", seed " << seed;
        }
      }
    }
  }
}

TEST(ThreadPool, SmallWorkRunsInlineOnTheCaller) {
  ThreadPool pool(4);
  std::vector<int> seen;
  pool.parallel_for(
      10, [&](size_t b, size_t e, int t) { seen.push_back(t), seen.push_back(int(e - b)); }, 10);
  EXPECT_EQ(seen, (std::vector<int>{0, 10}));
}

// A shuffled schedule cuts differently per region and per seed, and a seed repeats its cuts.
TEST(ThreadPool, ShuffledScheduleVariesTheCutAndRepeatsPerSeed) {
  const auto cuts = [](uint64_t seed) {
    ThreadPool pool(1, {seed});
    std::vector<std::vector<size_t>> regions(20);
    for (auto& r : regions) pool.parallel_for(100, [&](size_t b, size_t, int) { r.push_back(b); });
    return regions;
  };
  const auto a = cuts(3), b = cuts(3), c = cuts(4);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  bool unordered = false, cut_differs = false;
  for (const auto& r : a) unordered |= !std::is_sorted(r.begin(), r.end());
  for (size_t i = 1; i < a.size(); ++i) cut_differs |= a[i].size() != a[0].size();
  EXPECT_TRUE(unordered);
  EXPECT_TRUE(cut_differs);
}

TEST(ThreadPool, RunsManyRegionsBackToBack) {
  ThreadPool pool(4);
  std::atomic<long> total{0};
  for (int rep = 0; rep < 2000; ++rep)
    pool.parallel_for(64, [&](size_t b, size_t e, int) { total += long(e - b); });
  EXPECT_EQ(total.load(), 2000L * 64);
}

// Whichever thread's chunk throws, the region stops, the caller gets the exception, and the pool
// runs the next region whole.
TEST(ThreadPool, AnExceptionInAChunkReachesTheCallerAndThePoolGoesOn) {
  for (uint64_t seed : {0u, 5u}) {
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads, {seed});
      for (size_t bad : {0u, 500u, 999u}) {
        EXPECT_THROW(pool.parallel_for(1000,
                                       [&](size_t b, size_t e, int) {
                                         if (b <= bad && bad < e) throw std::runtime_error("bad item");
                                       }),
                     std::runtime_error);
        std::vector<std::atomic<int>> hits(1000);
        pool.parallel_for(hits.size(), [&](size_t b, size_t e, int) {
          for (size_t i = b; i < e; ++i) hits[i]++;
        });
        for (auto& h : hits) ASSERT_EQ(h.load(), 1) << threads << " threads, seed " << seed;
      }
    }
  }
}

// A thread held up inside a chunk (as by another process taking its core) holds the region up by
// that chunk only: the others take every chunk left.
TEST(ThreadPool, ThreadsThatRunTakeTheShareOfOneHeldUp) {
  ThreadPool pool(2);
  std::atomic<size_t> items{0}, caller_chunks{0}, worker_chunks{0};
  std::atomic<bool> held{false};
  const size_t n = 64;
  pool.parallel_for(n, [&](size_t b, size_t e, int t) {
    if (t == 1 && !held.exchange(true)) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    // The caller waits (up to 10 s, for a loaded machine) for the worker to be held up first.
    for (int i = 0; t == 0 && !held && i < 10000; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ++(t == 0 ? caller_chunks : worker_chunks);
    items += e - b;
  });
  EXPECT_EQ(items.load(), n);
  ASSERT_TRUE(held) << "the worker never joined the region";
  EXPECT_EQ(worker_chunks.load(), 1u) << "the worker, held up in its first chunk, took only that one";
  EXPECT_GE(caller_chunks.load(), 2u) << "the caller took the rest";
}

}  // namespace
}  // namespace ts
