#include "policies/key_budget.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>

#include "core/error.h"
#include "kernels/simd_ops.h"
#include "model/model.h"

namespace ts {

PolicyOptionList KeyBudget::options() {
  return {number_option("keep", 0, 1, "", "the fraction of keys each query attends to"),
          integer_option("sinks", 0, 1u << 20, "4", "first positions always kept"),
          integer_option("first_layer", 0, 1u << 16, "1", "layers before it attend densely")};
}

KeyBudget::KeyBudget(PolicyOptions& options, double keep_default) {
  const std::optional<double> keep = options.number("keep");
  TS_CHECK(keep || keep_default >= 0, "policy ", options.spec().name,
           ": give keep=F, the fraction of keys kept");
  keep_given_ = keep.has_value();
  keep_ = keep ? *keep : keep_default;
  TS_CHECK(keep_ > 0, "policy ", options.spec().name, ": keep must be above 0");
  sinks_ = *options.integer("sinks");
  first_layer_ = static_cast<uint32_t>(*options.integer("first_layer"));
}

void KeyBudget::bind(const Model& model, const std::string& policy) {
  const uint32_t n_layers = model.config().n_layers;
  TS_CHECK(first_layer_ < n_layers, "policy ", policy, ": first_layer=", first_layer_, " but the model has ",
           n_layers, " layers");
  layers_.clear();
  for (uint32_t l = first_layer_; l < n_layers; ++l) layers_.push_back(l);
}

namespace {

// Order-preserving integer image of a score: a > b as floats iff key(a) > key(b); -0 and +0 map
// to the same key, as they compare equal. Arithmetic only, so that a loop of them vectorizes.
uint32_t order_key(float s) {
  uint32_t u = std::bit_cast<uint32_t>(s);
  u = u == 0x80000000u ? 0u : u;
  return u ^ (static_cast<uint32_t>(static_cast<int32_t>(u) >> 31) | 0x80000000u);  // < 0: ~u
}

// The smallest and largest of keys[0..n).
struct KeySpan {
  uint32_t lo = UINT32_MAX, hi = 0;
};
KeySpan key_span(const uint32_t* keys, size_t n) {
  KeySpan span;
  for (size_t j = 0; j < n; ++j) span.lo = std::min(span.lo, keys[j]), span.hi = std::max(span.hi, keys[j]);
  return span;
}

// The k-th largest of keys[0..n) (1 <= k <= n), and how many keys equal it: in total, and among
// the k largest (the earliest ones are taken).
struct KthKey {
  uint32_t key = 0;
  size_t taken = 0, equal = 0;
};

// By radix select on the bits below those every remaining key shares, at most 11 at a time from
// the top: one count per digit, then only the keys with the chosen digit go on (into `rest`). The
// scores of one list share their sign and most exponent bits, so a fixed byte-by-byte split spends
// whole passes on bits that select nothing; here the first round's digits already spread the keys
// thinly. Keys equal to the k-th largest share every digit with it, so all of them reach the end.
KthKey radix_kth_largest(const uint32_t* keys, size_t n, size_t k, std::vector<uint32_t>& rest) {
  constexpr int kDigitBits = 11;
  KeySpan span = key_span(keys, n);
  std::array<uint32_t, size_t{1} << kDigitBits> count;
  rest.resize(n);
  const uint32_t* from = keys;
  while (span.lo != span.hi) {
    // span.lo and span.hi agree from bit `top` up, and so does every key between them.
    const int top = std::bit_width(span.lo ^ span.hi), shift = std::max(0, top - kDigitBits);
    const uint32_t base = span.lo >> shift;  // digits (key >> shift) - base < 2^kDigitBits
    const size_t n_digits = (span.hi >> shift) - base + 1;
    std::fill_n(count.begin(), n_digits, 0u);
    for (size_t j = 0; j < n; ++j) ++count[(from[j] >> shift) - base];
    size_t digit = n_digits - 1;
    for (; count[digit] < k; --digit) k -= count[digit];
    const uint32_t chosen = base + static_cast<uint32_t>(digit);
    size_t kept = 0;  // branch-free: whether a key has the digit is unpredictable
    for (size_t j = 0; j < n; ++j) {
      const uint32_t key = from[j];
      rest[kept] = key;
      kept += (key >> shift) == chosen;
    }
    n = kept;
    from = rest.data();
    span = key_span(from, n);
  }
  return {span.lo, k, n};
}

// Long lists first bracket the k-th largest between two keys of a sample (its expected rank
// there, +- 3 standard deviations), count the keys above the bracket and compress those in it in
// one vector pass, and radix-select among those (about a fifth of the list at keep 0.5), instead of
// counting digits over the whole list. A sample that misses (about 1 list in 370) falls back.
KthKey kth_largest(const uint32_t* keys, size_t n, size_t k, std::vector<uint32_t>& bracket,
                   std::vector<uint32_t>& rest) {
  constexpr size_t kSample = 256;
  if (n < 8 * kSample) return radix_kth_largest(keys, n, k, rest);
  std::array<uint32_t, kSample> sample;
  for (size_t i = 0; i < kSample; ++i) sample[i] = keys[i * n / kSample];
  const double p = static_cast<double>(k) / static_cast<double>(n);
  const auto margin = static_cast<size_t>(std::ceil(3.0 * std::sqrt(kSample * p * (1.0 - p)))) + 1;
  const size_t rank = k * kSample / n;  // from the top, 0-based
  const auto descending = std::greater<uint32_t>();
  uint32_t hi = UINT32_MAX, lo = 0;
  if (rank >= margin) {
    std::nth_element(sample.begin(), sample.begin() + (rank - margin), sample.end(), descending);
    hi = sample[rank - margin];
  }
  if (rank + margin < kSample) {
    const size_t from = rank >= margin ? rank - margin : 0;
    std::nth_element(sample.begin() + from, sample.begin() + (rank + margin), sample.end(), descending);
    lo = sample[rank + margin];
  }
  bracket.resize(n);
  const RangeCount c = ops().compress_range(keys, keys, n, lo, hi, bracket.data());
  if (c.above >= k || c.above + c.in_range < k) return radix_kth_largest(keys, n, k, rest);
  return radix_kth_largest(bracket.data(), c.in_range, k - c.above, rest);
}

}  // namespace

void select_top_keys(std::span<const uint32_t> candidates, std::span<const float> scores, size_t k,
                     size_t sinks, std::vector<uint32_t>& keys) {
  TS_CHECK(scores.size() == candidates.size(), "select_top_keys: ", scores.size(), " scores for ",
           candidates.size(), " candidates");
  keys.clear();
  const size_t n_cand = candidates.size();
  if (k >= n_cand) {
    keys.assign(candidates.begin(), candidates.end());
    return;
  }
  thread_local std::vector<uint32_t> order_keys, bracket, rest;
  order_keys.resize(n_cand);
  uint32_t* ordered = order_keys.data();  // read through a pointer: a thread_local is looked up per access
  for (size_t j = 0; j < n_cand; ++j) ordered[j] = order_key(scores[j]);
  const uint32_t* cand = candidates.data();
  keys.resize(n_cand);
  uint32_t* out = keys.data();
  const size_t n_sinks = static_cast<size_t>(
      std::partition_point(cand, cand + n_cand, [&](uint32_t j) { return j < sinks; }) - cand);
  std::copy_n(cand, n_sinks, out);  // a prefix, as the candidates ascend
  size_t n = n_sinks;
  if (k > 0) {
    // The k-th largest key is the threshold: above it everything is kept, at it the earliest
    // `taken`, which end before `tie_end` (the end, unless only some of them are taken).
    const KthKey kth = kth_largest(ordered, n_cand, k, bracket, rest);
    size_t tie_end = n_cand;
    if (kth.taken < kth.equal)
      for (size_t seen = tie_end = 0; seen < kth.taken; ++tie_end) seen += ordered[tie_end] == kth.key;
    const SimdOps& o = ops();
    const size_t split = std::max(n_sinks, tie_end);
    n += o.compress_range(ordered + n_sinks, cand + n_sinks, split - n_sinks, kth.key, UINT32_MAX, out + n)
             .in_range;
    if (kth.key < UINT32_MAX)
      n += o.compress_range(ordered + split, cand + split, n_cand - split, kth.key + 1, UINT32_MAX, out + n)
               .in_range;
  }
  keys.resize(n);
}

}  // namespace ts
