#include "runtime/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <numeric>

#include "core/error.h"
#include "kernels/quant_types.h"
#include "kernels/simd_ops.h"

namespace ts {

std::string KvFormat::describe() const {
  if (!quantized()) return "f16";
  std::string s = "int" + std::to_string(bits) + (channel_keys ? " kivi" : " per-token") +
                  " group=" + std::to_string(group);
  if (residual) s += " residual=" + std::to_string(residual);
  if (ranges) s += " static";
  if (quantized_prefill) s += " quantized-prefill";
  if (low_bits) s += " low=int" + std::to_string(low_bits);
  return s;
}

KvCache::KvCache(size_t n_layers, size_t n_ctx, size_t kv_dim, size_t head_dim, KvFormat format)
    : n_layers_(n_layers),
      n_ctx_(n_ctx),
      kv_dim_(kv_dim),
      head_dim_(head_dim ? head_dim : kv_dim),
      format_(format),
      all_positions_(n_ctx),
      partial_(n_layers, 0),
      held_(n_layers),
      slot_of_(n_layers) {
  std::iota(all_positions_.begin(), all_positions_.end(), 0u);
  if (!format.quantized()) {
    TS_CHECK(format.bits == 16, "KV cache: bits must be 16, 8, 4 or 2");
    TS_CHECK(kv_dim % head_dim_ == 0, "KV cache: kv_dim ", kv_dim, " is not a multiple of head_dim ",
             head_dim_);
    // 2 MiB pages: decode at depth 8000 ran 5-10% faster than with 4 KiB pages (SmolLM2, AVX2, 2
    // threads), at the price of residency in 2 MiB steps per (layer, KV head) region.
    keys_ = LargePageBuffer(n_layers * n_ctx * kv_dim * sizeof(uint16_t));
    values_ = LargePageBuffer(n_layers * n_ctx * kv_dim * sizeof(uint16_t));
    return;
  }
  const size_t g = format.group;
  TS_CHECK(valid_code_bits(format.bits), "KV cache: bits must be 16, 8, 4 or 2, not ", format.bits);
  TS_CHECK(g >= 4 && g % 4 == 0, "KV cache: group must be a positive multiple of 4, not ", g);
  head_dim = head_dim_;
  TS_CHECK(head_dim % 4 == 0, "KV cache: quantized formats need a head dim divisible by 4 (", head_dim, ")");
  TS_CHECK(format.low_bits == 0 ||
               (valid_code_bits(format.low_bits) && format.low_bits < format.bits && !format.channel_keys),
           "KV cache: low bits must be 8, 4 or 2, below bits, with per-token keys");
  TS_CHECK(format.low_bits == 0 || !format.ranges, "KV cache: static ranges have one width (no low bits)");
  row_bytes_ = code_bytes(format.bits, kv_dim);
  n_groups_ = (kv_dim + g - 1) / g;
  n_blocks_ = (n_ctx + g - 1) / g;
  window_ = std::min(n_ctx, format.residual + g + kKvWindowBatch);
  key_codes_ = ZeroedArray<uint8_t>(n_layers * n_ctx * row_bytes_);
  value_codes_ = ZeroedArray<uint8_t>(n_layers * n_ctx * row_bytes_);
  if (format.ranges) {
    const KvStaticRanges& r = *format.ranges;
    TS_CHECK(r.n_layers == n_layers && r.kv_dim == kv_dim, "KV cache: static ranges of ", r.n_layers,
             " layers x ", r.kv_dim, " channels for a cache of ", n_layers, " x ", kv_dim);
    const auto per_group = [&](const std::vector<float>& lo, const std::vector<float>& hi) {
      std::vector<CodeRange> out(n_layers * n_groups_);
      for (size_t l = 0; l < n_layers; ++l)
        for (size_t gi = 0; gi < n_groups_; ++gi) {
          const size_t a = l * kv_dim + gi * g, b = l * kv_dim + std::min(kv_dim, (gi + 1) * g);
          out[l * n_groups_ + gi] = code_range(*std::min_element(lo.data() + a, lo.data() + b),
                                               *std::max_element(hi.data() + a, hi.data() + b), format.bits);
        }
      return out;
    };
    static_value_ = per_group(r.value_lo, r.value_hi);
    if (format.channel_keys) {
      static_key_.resize(n_layers * kv_dim);
      for (size_t i = 0; i < static_key_.size(); ++i)
        static_key_[i] = code_range(r.key_lo[i], r.key_hi[i], format.bits);
    } else {
      static_key_ = per_group(r.key_lo, r.key_hi);
    }
  } else {
    value_ranges_ = ZeroedArray<CodeRange>(n_layers * n_ctx * n_groups_);
    if (format.channel_keys) {
      key_block_ranges_ = ZeroedArray<CodeRange>(n_layers * n_blocks_ * kv_dim);
    } else {
      key_ranges_ = ZeroedArray<CodeRange>(n_layers * n_ctx * n_groups_);
    }
  }
  kind_.assign(n_layers * n_ctx, kAbsent);
  ring_k_.resize(n_layers * window_ * kv_dim);
  ring_v_.resize(n_layers * window_ * kv_dim);
  pinned_pos_.resize(n_layers);
  pinned_k_.resize(n_layers);
  pinned_v_.resize(n_layers);
  keys_coded_to_.assign(n_layers, 0);
  for (size_t h = 0; h * head_dim < kv_dim; ++h) {
    const size_t lo = h * head_dim, hi = lo + head_dim;
    head_segments_.push_back({uint32_t(lo), uint32_t(head_dim), 0});
    std::vector<KvSegment>& segs = group_segments_.emplace_back();
    for (size_t c = lo; c < hi;) {
      const size_t end = std::min(hi, (c / g + 1) * g);
      segs.push_back({uint32_t(c), uint32_t(end - c), uint32_t(c / g)});
      c = end;
    }
  }
}

size_t KvCache::coded_token_bytes(unsigned bits) const {
  if (static_ranges()) return 2 * code_bytes(bits, kv_dim_) + sizeof(uint8_t);
  const size_t ranges = sizeof(CodeRange) * n_groups_;
  const size_t key_ranges =
      format_.channel_keys ? (sizeof(CodeRange) * kv_dim_ + format_.group - 1) / format_.group : ranges;
  return 2 * code_bytes(bits, kv_dim_) + ranges + key_ranges + sizeof(uint8_t);
}

size_t KvCache::bytes_per_token() const {
  return n_layers_ * (quantized() ? coded_token_bytes(format_.bits) : full_token_bytes());
}

size_t KvCache::resident_bytes() const {
  const auto heap = []<class T>(const std::vector<T>& v) { return v.capacity() * sizeof(T); };
  size_t total = keys_.resident_bytes() + values_.resident_bytes() + key_codes_.resident_bytes() +
                 value_codes_.resident_bytes() + key_ranges_.resident_bytes() +
                 value_ranges_.resident_bytes() + key_block_ranges_.resident_bytes() + heap(static_key_) +
                 heap(static_value_) + heap(kind_) + heap(ring_k_) + heap(ring_v_) + heap(all_positions_);
  for (size_t l = 0; l < n_layers_; ++l) {
    total += heap(held_[l]) + heap(slot_of_[l]);
    if (l < pinned_pos_.size())  // quantized formats only
      total += heap(pinned_pos_[l]) + heap(pinned_k_[l]) + heap(pinned_v_[l]);
  }
  return total;
}

size_t KvCache::held_bytes() const {
  if (n_used_ == 0) return 0;
  size_t total = 0;
  for (size_t l = 0; l < n_layers_; ++l) {
    const std::span<const uint32_t> held = this->held(l, n_used_ - 1);
    if (!quantized()) {
      total += held.size() * full_token_bytes();
      continue;
    }
    const size_t full = full_token_bytes() + sizeof(uint8_t), high = coded_token_bytes(format_.bits);
    const size_t low = format_.low_bits ? coded_token_bytes(format_.low_bits) : 0;
    for (uint32_t pos : held) {
      const uint8_t kind = kind_[l * n_ctx_ + pos];
      total += kind == kFull ? full : kind == kCodedLow ? low : high;
    }
  }
  return total;
}

void KvCache::begin_batch(size_t pos0, size_t n_tok) {
  if (!quantized()) return;
  if (n_tok > kKvWindowBatch) grow_window(pos0, n_tok);
  const size_t n_total = pos0 + n_tok, g = format_.group;
  const size_t recent = n_total - std::min(n_total, format_.residual);
  const size_t keys_coded = format_.channel_keys && !static_ranges() ? n_total / g * g : n_total;
  const size_t wanted = std::min(keys_coded, format_.quantized_prefill ? recent : std::min(pos0, recent));
  window_from_ = std::max(n_total - std::min(n_total, window_), wanted);
}

// A batch longer than kKvWindowBatch (a policy that runs the whole prompt at once): the window
// grows to hold it, since full-precision rows and KIVI key blocks are taken from the window at
// commit(), after the whole batch was written. The rows of the positions before the batch that
// the window holds move to their slots in the larger ring.
void KvCache::grow_window(size_t pos0, size_t n_tok) {
  const size_t window = std::min(n_ctx_, format_.residual + format_.group + n_tok);
  if (window <= window_) return;
  std::vector<uint16_t> k(n_layers_ * window * kv_dim_), v(k.size());
  for (size_t l = 0; l < n_layers_; ++l)
    for (size_t p = pos0 - std::min(pos0, window_); p < pos0; ++p) {
      std::copy_n(ring_row(ring_k_, l, p), kv_dim_, &k[(l * window + p % window) * kv_dim_]);
      std::copy_n(ring_row(ring_v_, l, p), kv_dim_, &v[(l * window + p % window) * kv_dim_]);
    }
  ring_k_.swap(k);
  ring_v_.swap(v);
  window_ = window;
}

const CodeRange* KvCache::measure_groups(const float* x, unsigned bits, CodeRange* ranges) const {
  for (size_t g = 0; g < n_groups_; ++g) {
    const size_t lo = g * format_.group, hi = std::min(kv_dim_, lo + format_.group);
    const auto [mn, mx] = std::minmax_element(x + lo, x + hi);
    ranges[g] = code_range(*mn, *mx, bits);
  }
  return ranges;
}

void KvCache::code_row(const float* x, unsigned bits, uint8_t* codes, const CodeRange* ranges,
                       bool per_channel) const {
  uint8_t c[512];
  for (size_t h = 0; h < group_segments_.size(); ++h)
    for (const KvSegment& s : per_channel ? std::span<const KvSegment>(head_segments_).subspan(h, 1)
                                          : std::span<const KvSegment>(group_segments_[h])) {
      TS_CHECK(s.size <= sizeof c, "KV cache: segment too long");
      for (size_t j = 0; j < s.size; ++j)
        c[j] = code_of(x[s.offset + j], ranges[per_channel ? s.offset + j : s.group], bits);
      pack_codes(c, s.size, bits, codes + code_bytes(bits, s.offset));
    }
}

void KvCache::store(size_t layer, size_t pos, const float* k, const float* v, KvStorage storage) {
  const SimdOps& ops_ = ops();
  if (!quantized()) {
    const size_t row = slot(layer, pos);
    TS_CHECK(row != kNoSlot, "KV cache: position ", pos, " stored at layer ", layer,
             ", which does not hold it");
    for (size_t h = 0; h < n_kv_heads(); ++h) {
      ops_.f32_to_f16(k + h * head_dim_, half_head(keys_, layer, h) + row * head_dim_, head_dim_);
      ops_.f32_to_f16(v + h * head_dim_, half_head(values_, layer, h) + row * head_dim_, head_dim_);
    }
    return;
  }
  ops_.f32_to_f16(k, ring_row(ring_k_, layer, pos), kv_dim_);
  ops_.f32_to_f16(v, ring_row(ring_v_, layer, pos), kv_dim_);
  const size_t row = layer * n_ctx_ + pos;
  kind_[row] = storage == KvStorage::Full ? kFull : storage == KvStorage::Low ? kCodedLow : kCoded;
  if (storage == KvStorage::Full) return;
  // A low-precision row takes the first bytes of its slot.
  const unsigned bits = storage == KvStorage::Low ? format_.low_bits : format_.bits;
  const auto ranges_of = [&](const float* x, ZeroedArray<CodeRange>& dynamic,
                             const std::vector<CodeRange>& fixed) {
    return static_ranges() ? &fixed[layer * n_groups_] : measure_groups(x, bits, &dynamic[row * n_groups_]);
  };
  code_row(v, bits, &value_codes_[row * row_bytes_], ranges_of(v, value_ranges_, static_value_), false);
  if (!format_.channel_keys) {
    code_row(k, bits, &key_codes_[row * row_bytes_], ranges_of(k, key_ranges_, static_key_), false);
  } else if (static_ranges()) {  // per channel, coded at once: no block to wait for
    code_row(k, bits, &key_codes_[row * row_bytes_], &static_key_[layer * kv_dim_], true);
  }
}

// KIVI: one block of `group` tokens, each channel over the block's coded tokens (full-precision
// tokens take no part in the ranges), from the half-precision window.
void KvCache::code_key_block(size_t layer, size_t block) {
  const size_t g = format_.group, p0 = block * g, p1 = std::min(n_ctx_, p0 + g);
  CodeRange* ranges = &key_block_ranges_[(layer * n_blocks_ + block) * kv_dim_];
  std::vector<float> lo(kv_dim_, INFINITY), hi(kv_dim_, -INFINITY), x(kv_dim_);
  for (size_t p = p0; p < p1; ++p) {
    if (kind_[layer * n_ctx_ + p] != kCoded) continue;
    const uint16_t* r = ring_row(ring_k_, layer, p);
    for (size_t ch = 0; ch < kv_dim_; ++ch) {
      const float x = fp16_to_float(r[ch]);
      lo[ch] = std::min(lo[ch], x);
      hi[ch] = std::max(hi[ch], x);
    }
  }
  for (size_t ch = 0; ch < kv_dim_; ++ch)
    ranges[ch] = lo[ch] <= hi[ch] ? code_range(lo[ch], hi[ch], format_.bits) : CodeRange{};
  for (size_t p = p0; p < p1; ++p) {
    if (kind_[layer * n_ctx_ + p] != kCoded) continue;
    const uint16_t* r = ring_row(ring_k_, layer, p);
    for (size_t ch = 0; ch < kv_dim_; ++ch) x[ch] = fp16_to_float(r[ch]);
    code_row(x.data(), format_.bits, &key_codes_[(layer * n_ctx_ + p) * row_bytes_], ranges, true);
  }
}

void KvCache::commit(size_t layer, size_t pos0, size_t n_tok) {
  if (!quantized()) return;
  std::vector<uint32_t>& pins = pinned_pos_[layer];
  for (size_t p = pos0; p < pos0 + n_tok; ++p) {
    if (kind_[layer * n_ctx_ + p] != kFull) continue;
    const auto at = std::lower_bound(pins.begin(), pins.end(), uint32_t(p));
    const size_t slot = static_cast<size_t>(at - pins.begin());
    pins.insert(at, uint32_t(p));
    const auto insert_row = [&](std::vector<uint16_t>& rows, const std::vector<uint16_t>& ring) {
      const uint16_t* r = ring_row(ring, layer, p);
      rows.insert(rows.begin() + static_cast<std::ptrdiff_t>(slot * kv_dim_), r, r + kv_dim_);
    };
    insert_row(pinned_k_[layer], ring_k_);
    insert_row(pinned_v_[layer], ring_v_);
  }
  if (!format_.channel_keys || static_ranges()) return;
  for (size_t& done = keys_coded_to_[layer]; done + format_.group <= pos0 + n_tok; done += format_.group)
    code_key_block(layer, done / format_.group);
}

KvRowRef KvCache::row_ref(size_t layer, size_t pos, const std::vector<uint16_t>& ring,
                          const std::vector<std::vector<uint16_t>>& pinned, bool keys) const {
  if (pos >= window_from_) return {ring_row(ring, layer, pos), nullptr, nullptr};
  const size_t row = layer * n_ctx_ + pos;
  if (kind_[row] == kFull) {
    const std::vector<uint32_t>& pins = pinned_pos_[layer];
    const size_t slot =
        static_cast<size_t>(std::lower_bound(pins.begin(), pins.end(), uint32_t(pos)) - pins.begin());
    return {&pinned[layer][slot * kv_dim_], nullptr, nullptr};
  }
  const ZeroedArray<uint8_t>& codes = keys ? key_codes_ : value_codes_;
  const CodeRange* ranges =
      keys ? (format_.channel_keys ? nullptr : group_ranges(key_ranges_, static_key_, layer, row))
           : group_ranges(value_ranges_, static_value_, layer, row);
  return {nullptr, &codes[row * row_bytes_], ranges,
          kind_[row] == kCodedLow ? format_.low_bits : format_.bits};
}

size_t KvCache::coded_run(size_t layer, size_t pos, size_t max_len) const {
  const size_t end = std::min(pos + max_len, window_from_);
  const uint8_t* kind = &kind_[layer * n_ctx_];
  size_t p = pos + 1;
  while (p < end && kind[p] == kind[pos]) ++p;
  return p - pos;
}

void KvCache::read_head(size_t layer, size_t pos, size_t kvh, bool keys, float* out) const {
  const size_t base = kvh * head_dim_;
  const auto from_half = [&](const uint16_t* head) {
    for (size_t c = 0; c < head_dim_; ++c) out[c] = fp16_to_float(head[c]);
  };
  if (!quantized()) {
    const size_t row = slot(layer, pos);
    if (row == kNoSlot) {  // not held: no key, no value
      std::fill_n(out, head_dim_, 0.0f);
      return;
    }
    return from_half((keys ? key_head(layer, kvh) : value_head(layer, kvh)) + row * head_dim_);
  }
  const KvRowRef r = keys ? key_row(layer, pos) : value_row(layer, pos);
  if (r.half) return from_half(r.half + base);
  // KIVI key codes are packed per head (one segment) with a range per channel; per-token codes
  // per group segment with the token's group ranges, at the row's own width.
  const CodeRange* channel = keys && format_.channel_keys ? key_block_ranges(layer, pos) : nullptr;
  for (const KvSegment& s : segments(kvh, keys)) {
    const uint8_t* packed = r.codes + code_bytes(r.bits, s.offset);
    for (size_t j = 0; j < s.size; ++j) {
      const CodeRange cr = channel ? channel[s.offset + j] : r.ranges[s.group];
      out[s.offset - base + j] = cr.scale * static_cast<float>(code_at(packed, r.bits, s.size, j)) + cr.min;
    }
  }
}

void KvCache::read_key(size_t layer, size_t pos, float* out) const {
  for (size_t h = 0; h * head_dim_ < kv_dim_; ++h) read_head(layer, pos, h, true, out + h * head_dim_);
}

void KvCache::read_value(size_t layer, size_t pos, float* out) const {
  for (size_t h = 0; h * head_dim_ < kv_dim_; ++h) read_head(layer, pos, h, false, out + h * head_dim_);
}

float KvCache::key_dot(size_t layer, size_t pos, size_t kvh, const float* q) const {
  if (!quantized()) {
    const size_t row = slot(layer, pos);
    return row == kNoSlot ? 0.0f : ops().dot_f16_f32(key_head(layer, kvh) + row * head_dim_, q, head_dim_);
  }
  thread_local std::vector<float> row;
  row.resize(head_dim_);
  read_head(layer, pos, kvh, true, row.data());
  return ops().dot_f32(row.data(), q, head_dim_);
}

size_t KvCache::forget_held_from(std::vector<uint32_t>& held, std::vector<uint32_t>& slot_of, size_t pos) {
  const auto end = std::lower_bound(held.begin(), held.end(), pos);
  for (auto p = end; p != held.end(); ++p) slot_of[*p] = kNoSlot;
  const size_t kept = static_cast<size_t>(end - held.begin());
  held.resize(kept);
  return kept;
}

void KvCache::set_size(size_t n) {
  if (quantized() && n < n_used_) {
    for (size_t l = 0; l < n_layers_; ++l) {
      std::fill(kind_.begin() + static_cast<std::ptrdiff_t>(l * n_ctx_ + n),
                kind_.begin() + static_cast<std::ptrdiff_t>(l * n_ctx_ + n_used_), kAbsent);
      std::vector<uint32_t>& pins = pinned_pos_[l];
      const size_t kept =
          static_cast<size_t>(std::lower_bound(pins.begin(), pins.end(), uint32_t(n)) - pins.begin());
      pins.resize(kept);
      pinned_k_[l].resize(kept * kv_dim_);
      pinned_v_[l].resize(kept * kv_dim_);
      // A coded KIVI key block cut by the new end is coded again once full: its kept keys go
      // back to the window, decoded, unless the window still holds them as written.
      size_t& coded = keys_coded_to_[l];
      if (coded <= n) continue;
      const size_t block_start = n / format_.group * format_.group;
      if (block_start + window_ < n_used_) {
        std::vector<float> row(kv_dim_);
        window_from_ = n_ctx_;  // read the codes
        for (size_t p = block_start; p < n; ++p) {
          if (kind_[l * n_ctx_ + p] != kCoded) continue;
          read_key(l, p, row.data());
          ops().f32_to_f16(row.data(), ring_row(ring_k_, l, p), kv_dim_);
        }
      }
      coded = block_start;
    }
  }
  n_used_ = n;
  for (size_t l = 0; l < n_layers_; ++l) {
    if (!partial_[l]) continue;
    std::vector<uint32_t>& h = held_[l];
    forget_held_from(h, slot_of_[l], n);
    if (h.size() == n) {  // ascending, unique and below n: every position is back
      partial_[l] = 0;
      h.clear();
      slot_of_[l] = {};
    }
  }
}

std::span<const uint32_t> KvCache::held(size_t layer, size_t pos) const {
  if (!partial_[layer]) return std::span(all_positions_).first(std::min(pos + 1, n_ctx_));
  const std::vector<uint32_t>& h = held_[layer];
  return std::span(h.data(), static_cast<size_t>(std::upper_bound(h.begin(), h.end(), pos) - h.begin()));
}

// Slots so far are the positions, so no row moves.
void KvCache::list_held(size_t layer, size_t up_to) {
  partial_[layer] = 1;
  held_[layer].assign(all_positions_.begin(), all_positions_.begin() + static_cast<std::ptrdiff_t>(up_to));
  slot_of_[layer].assign(n_ctx_, kNoSlot);
  index_held(layer, 0);
  if (quantized()) return;
  const size_t layer_bytes = n_kv_heads() * head_stride() * sizeof(uint16_t);
  ts::use_small_pages(half_head(keys_, layer, 0), layer_bytes);
  ts::use_small_pages(half_head(values_, layer, 0), layer_bytes);
}

size_t KvCache::slot(size_t layer, size_t pos) const { return partial_[layer] ? slot_of_[layer][pos] : pos; }

void KvCache::index_held(size_t layer, size_t from) {
  const std::vector<uint32_t>& h = held_[layer];
  for (size_t i = from; i < h.size(); ++i) slot_of_[layer][h[i]] = static_cast<uint32_t>(i);
}

std::span<const uint32_t> KvCache::slots(size_t layer, std::span<const uint32_t> positions,
                                         std::vector<uint32_t>& buffer) const {
  if (quantized() || !partial_[layer]) return positions;
  const uint32_t* slot_of = slot_of_[layer].data();
  buffer.resize(positions.size());
  bool missing = false;
  for (size_t i = 0; i < positions.size(); ++i) {
    buffer[i] = slot_of[positions[i]];
    missing |= buffer[i] == kNoSlot;
  }
  if (missing)
    for (const uint32_t p : positions)
      TS_CHECK(slot_of[p] != kNoSlot, "KV cache: position ", p, " is not held at layer ", layer);
  return buffer;
}

void KvCache::keep_held(size_t layer, std::vector<uint32_t>& positions) const {
  if (!partial_[layer]) return;
  const uint32_t* slot_of = slot_of_[layer].data();
  size_t kept = 0;
  for (const uint32_t p : positions) {  // branch-free: whether a listed position is held is data
    positions[kept] = p;
    kept += slot_of[p] != kNoSlot;
  }
  positions.resize(kept);
}

void KvCache::hold_only(size_t layer, size_t pos0, std::span<const uint32_t> stored) {
  if (!partial_[layer]) list_held(layer, pos0);
  std::vector<uint32_t>& h = held_[layer];
  const size_t from = forget_held_from(h, slot_of_[layer], pos0);
  h.insert(h.end(), stored.begin(), stored.end());
  index_held(layer, from);
}

void KvCache::hold_all(size_t layer, size_t pos0, size_t n_tok) {
  if (!partial_[layer]) return;
  std::vector<uint32_t>& h = held_[layer];
  const size_t from = forget_held_from(h, slot_of_[layer], pos0);
  for (size_t p = pos0; p < pos0 + n_tok; ++p) h.push_back(static_cast<uint32_t>(p));
  index_held(layer, from);
}

void KvCache::use_small_pages(bool small) {
  TS_CHECK(n_used_ == 0, "KV cache: the page size is chosen before a sequence starts");
  if (quantized()) return;
  const size_t bytes = n_layers_ * n_kv_heads() * head_stride() * sizeof(uint16_t);
  for (const LargePageBuffer* rows : {&keys_, &values_}) {
    if (!small) {
      use_huge_pages(rows->data(), bytes);
      continue;
    }
    ts::use_small_pages(rows->data(), bytes);
    release_pages(rows->data(), bytes);  // an earlier sequence's rows
  }
}

void KvCache::evict(size_t layer, std::span<const uint32_t> positions) {
  if (positions.empty()) return;
  if (!partial_[layer]) list_held(layer, n_used_);
  std::vector<uint32_t> gone(positions.begin(), positions.end());
  std::sort(gone.begin(), gone.end());
  std::vector<uint32_t> kept;
  std::vector<uint32_t>& h = held_[layer];
  kept.reserve(h.size());
  std::set_difference(h.begin(), h.end(), gone.begin(), gone.end(), std::back_inserter(kept));
  // The rows before the first evicted one stay where they are.
  const size_t unmoved =
      static_cast<size_t>(std::mismatch(kept.begin(), kept.end(), h.begin()).first - kept.begin());
  if (!quantized()) move_rows(layer, h, kept, unmoved);
  h.swap(kept);
  for (const uint32_t p : gone) slot_of_[layer][p] = kNoSlot;
  index_held(layer, unmoved);
}

void KvCache::move_rows(size_t layer, std::span<const uint32_t> before, std::span<const uint32_t> kept,
                        size_t unmoved) {
  // Every row after the kept ones goes back: the freed rows, and the head's rows not yet written,
  // which its first rows made resident as whole 2 MiB pages (before the layer had holes); later
  // positions fault small pages in as they come.
  const size_t freed = (head_stride() - kept.size() * head_dim_) * sizeof(uint16_t);
  for (size_t kvh = 0; kvh < n_kv_heads(); ++kvh) {
    uint16_t *keys = half_head(keys_, layer, kvh), *values = half_head(values_, layer, kvh);
    // kept is a subsequence of before: row from is at or after its new slot to.
    for (size_t to = unmoved, from = unmoved; to < kept.size(); ++to, ++from) {
      while (before[from] != kept[to]) ++from;
      std::copy_n(keys + from * head_dim_, head_dim_, keys + to * head_dim_);
      std::copy_n(values + from * head_dim_, head_dim_, values + to * head_dim_);
    }
    release_pages(keys + kept.size() * head_dim_, freed);
    release_pages(values + kept.size() * head_dim_, freed);
  }
}

}  // namespace ts
