#pragma once
// A STREAM-like read-bandwidth probe: the physical limit of decode, which reads every weight once
// per token.
#include <cstddef>

#include "core/thread_pool.h"

namespace ts {

// Best of `reps` passes reading a `bytes` buffer (far larger than the caches) with all threads;
// returns GB/s (1e9 bytes per second).
double measure_read_bandwidth(ThreadPool& pool, size_t bytes = size_t{512} << 20, int reps = 5);

}  // namespace ts
