#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "core/thread_pool.h"

namespace ts {
namespace {

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (size_t n : {0u, 1u, 2u, 5u, 1000u}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(n, [&](size_t b, size_t e, int) {
        for (size_t i = b; i < e; ++i) hits[i]++;
      });
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " threads, n=" << n;
    }
  }
}

TEST(ThreadPool, RunsManyRegionsBackToBack) {
  ThreadPool pool(4);
  std::atomic<long> total{0};
  for (int rep = 0; rep < 2000; ++rep) pool.run([&](int t) { total += t + 1; });
  EXPECT_EQ(total.load(), 2000L * (1 + 2 + 3 + 4));
}

}  // namespace
}  // namespace ts
