#pragma once
// Internal: the loop of the block-dot kernels (dot_f16_blocks, dot_i8_pairs) over n_rows rows in
// blocks of kF16Block: runs of kRun blocks side by side (independent accumulator chains), single
// blocks, and a partial last block computed whole (the blocks are stored whole) and copied out.
#include <algorithm>
#include <cstddef>

#include "kernels/simd_ops.h"

namespace ts {

// run.template operator()<NB>(first block, out) writes NB blocks' kF16Block results to out.
template <int kRun, class Run>
void for_block_runs(size_t n_rows, float* out, Run&& run) {
  const size_t whole = n_rows / kF16Block;
  size_t b = 0;
  for (; b + kRun <= whole; b += kRun) run.template operator()<kRun>(b, out + b * kF16Block);
  for (; b < whole; ++b) run.template operator()<1>(b, out + b * kF16Block);
  if (const size_t rest = n_rows - whole * kF16Block) {
    float last[kF16Block];
    run.template operator()<1>(whole, last);
    std::copy_n(last, rest, out + whole * kF16Block);
  }
}

}  // namespace ts
