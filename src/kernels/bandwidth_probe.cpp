#include "kernels/bandwidth_probe.h"

#include <chrono>
#include <vector>

#include "core/mapped_file.h"
#include "kernels/simd_ops.h"

namespace ts {

double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps) {
  const size_t n = bytes / sizeof(float);
  // On 2 MiB pages, as the packed weights (model/model.cpp): 4 KiB pages would cost the probe a
  // TLB miss per page that decode does not pay.
  const LargePageBuffer storage(n * sizeof(float));
  float* buf = reinterpret_cast<float*>(storage.data());
  pool.parallel_for(n, [&](size_t b, size_t e, int) {  // first touch by the thread that reads it
    for (size_t i = b; i < e; ++i) buf[i] = static_cast<float>(i & 7);
  });
  const SimdOps& k = ops();
  double best = 0.0;
  volatile float sink = 0.0f;
  for (int r = 0; r < reps; ++r) {
    std::vector<float> partial(static_cast<size_t>(pool.size()));
    const auto t0 = std::chrono::steady_clock::now();
    // dot(x, x) loads each cache line once from memory; the second operand hits L1.
    pool.parallel_for(n, [&](size_t b, size_t e, int t) {
      partial[static_cast<size_t>(t)] += k.dot_f32(&buf[b], &buf[b], e - b);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (float p : partial) sink = sink + p;
    best = std::max(best, static_cast<double>(n * sizeof(float)) / s / 1e9);
  }
  return best;
}

}  // namespace ts
