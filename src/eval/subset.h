#pragma once
// Which examples of a task an evaluation runs (--limit, --seed), and which of them one shard of a
// distributed run takes (--shard).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace ts {

// Indices into n examples, increasing: all of them when limit is 0 or >= n; otherwise the first
// `limit`, or, given a seed, `limit` distinct indices drawn by a seeded shuffle that is the same
// on every platform (mt19937_64 and Fisher-Yates; std::shuffle's algorithm is unspecified).
std::vector<size_t> select_examples(size_t n, size_t limit, std::optional<uint64_t> seed);

// Shard `index` of `count`: a contiguous run of the selected examples (or perplexity windows), so
// that the shards' per-example results, concatenated in shard order, are the whole run's in order.
struct Shard {
  size_t index = 0, count = 1;
  // [begin, end) of n items: n * index / count up to n * (index + 1) / count.
  std::pair<size_t, size_t> range(size_t n) const;
};
// "I/N" with 0 <= I < N; throws ts::Error naming the text otherwise.
Shard parse_shard(std::string_view text);

}  // namespace ts
