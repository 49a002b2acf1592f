#pragma once
// Which examples of a task an evaluation runs (--limit, --seed).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace ts {

// Indices into n examples, increasing: all of them when limit is 0 or >= n; otherwise the first
// `limit`, or, given a seed, `limit` distinct indices drawn by a seeded shuffle that is the same
// on every platform (mt19937_64 and Fisher-Yates; std::shuffle's algorithm is unspecified).
std::vector<size_t> select_examples(size_t n, size_t limit, std::optional<uint64_t> seed);

}  // namespace ts
