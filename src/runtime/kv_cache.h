#pragma once
// Keys and values of past tokens per layer: the F16 format stores each KV head's rows together
// (head-major, key_head), the coded formats row t with all KV heads of the token at position t.
//
// Storage format (KvFormat): IEEE half precision (llama.cpp's default), or low-bit codes
// (kernels/kv_codes.h) read by fused dequantize-and-dot attention (runtime/kv_attention.h):
//   - values: per token, asymmetric RTN in groups of `group` channels;
//   - keys: the same per token, or per channel over blocks of `group` tokens (KIVI). A key block
//     is quantized once its `group` tokens are all written; until then its keys are read from a
//     half-precision window of the most recent tokens, which also serves the `residual` most
//     recent tokens (and, unless quantized_prefill, the batch being written) at full precision;
//   - tokens written as KvStorage::Full (attention sinks, Preserve-First-N) keep half-precision
//     K and V at that layer and take no part in any range;
//   - mixed precision (low_bits, per-token keys only): tokens written as KvStorage::Low are coded
//     at low_bits instead of bits (ZipVL's less important tokens), in the same slots; each row is
//     read with its own width;
//   - ranges are dynamic (each group's own min/max, stored per token or per key block) or static
//     (calibrated per layer, KvStaticRanges: nothing stored per token, KIVI keys coded at once,
//     values outside a range clamped to it).
//
// Each layer holds every position written so far, unless a policy left tokens out of that layer
// (SLEB skips it, OrthoRank's no-K/V ablation, Token Filtering, ZipVL) or evicted them (ZipVL).
// Such a layer lists the positions it holds; attention reads only those, and positions keep their
// numbers (RoPE was applied at the original position). In the F16 format its rows are addressed by
// slot: the j-th held position lives in row j, so the rows a layer holds take only their own
// memory and attention streams them like a dense cache (a layer without holes: slot = position).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "kernels/kv_codes.h"

namespace ts {

enum class KvStorage : uint8_t {
  Default,  // the cache's format
  Full,     // full precision whatever the cache's format (sink tokens under KVSink, Preserve-First-N)
  Dropped,  // not cached: later queries never see this token at this layer
  Low,      // coded at the format's low_bits (mixed precision: ZipVL's less important tokens)
};

// Calibrated ranges: per layer, the min and max of each K and V channel over calibration text.
// Per-channel keys (KIVI) use them as they are; a per-token group takes the extremes of its channels.
struct KvStaticRanges {
  size_t n_layers = 0, kv_dim = 0;
  std::vector<float> key_lo, key_hi, value_lo, value_hi;  // [layer][kv_dim]
};

struct KvFormat {
  unsigned bits = 16;         // 16: IEEE half; 8, 4, 2: RTN codes
  size_t group = 128;         // channels per value (and per-token key) group; tokens per KIVI key block
  bool channel_keys = false;  // KIVI: keys quantized per channel over blocks of `group` tokens
  size_t residual = 0;        // the most recent tokens read at full precision
  bool quantized_prefill =
      false;              // a batch attends to its own K/V quantized (the papers' fake-quant protocol)
  unsigned low_bits = 0;  // mixed precision: the width of KvStorage::Low tokens (0: none)
  std::shared_ptr<const KvStaticRanges> ranges{};  // static ranges (not with low_bits); null: dynamic

  bool quantized() const { return bits < 16; }
  std::string describe() const;
};

// The batch size the transformer writes at most per pass, unless a policy runs whole calls: the
// half-precision window holds it (and grows for a longer batch).
inline constexpr size_t kKvWindowBatch = 512;

// A run of channels within one KV head sharing one range: a per-token group cut at head
// boundaries, or (KIVI keys) a whole head whose channels each have their range.
struct KvSegment {
  uint32_t offset = 0;  // first channel within the row
  uint32_t size = 0;
  uint32_t group = 0;  // index into a token's CodeRange groups
};

// Where attention finds one cached row (quantized formats).
struct KvRowRef {
  const uint16_t* half = nullptr;     // F16 row (window or full-precision token), or nullptr: codes
  const uint8_t* codes = nullptr;     // packed row of kv_dim codes
  const CodeRange* ranges = nullptr;  // per-token groups (values; keys unless channel_keys)
  unsigned bits = 0;                  // width of the codes
};

class KvCache {
 public:
  // head_dim (0: kv_dim) cuts rows into KV heads for the quantized formats.
  KvCache(size_t n_layers, size_t n_ctx, size_t kv_dim, size_t head_dim = 0, KvFormat format = {});

  size_t capacity() const { return n_ctx_; }
  size_t size() const { return n_used_; }  // tokens currently cached (positions 0..size-1)
  size_t kv_dim() const { return kv_dim_; }
  size_t head_dim() const { return head_dim_; }
  const KvFormat& format() const { return format_; }
  bool quantized() const { return format_.quantized(); }
  // Storage of one more token over all layers, metadata included (KIVI's per-block key ranges
  // counted per token), rounded up to whole bytes. Full-precision tokens add full_token_bytes()
  // each on top; the half-precision window is a fixed window_bytes(), static ranges a fixed
  // static_range_bytes().
  size_t bytes_per_token() const;
  size_t full_token_bytes() const { return kv_dim_ * 2 * sizeof(uint16_t); }  // one layer
  // What the rows the layers hold now take, metadata included, over all layers (an F16 cache:
  // held rows x full_token_bytes()); the window and unused slots are not counted.
  size_t held_bytes() const;
  // The memory the cache occupies now: its buffers' resident pages (reserved for the whole
  // context, resident as written) and its heap arrays. Unlike held_bytes, counts what eviction
  // leaves behind (evicted rows of the coded formats) and the page granularity.
  size_t resident_bytes() const;
  size_t window_bytes() const { return ring_k_.size() * 2 * sizeof(uint16_t); }
  size_t static_range_bytes() const {
    return (static_key_.size() + static_value_.size()) * sizeof(CodeRange);
  }
  bool static_ranges() const { return format_.ranges != nullptr; }

  // F16 format, head-major: the keys (values) of KV head kvh, the row in slot j at
  // key_head(layer, kvh) + j * head_dim(). Attention reads one head's rows as one contiguous
  // stream; rows holding every head would make each head's reads a short piece of a long stride,
  // which the hardware prefetchers follow poorly (a third of the bandwidth at three KV heads).
  const uint16_t* key_head(size_t layer, size_t kvh) const { return half_head(keys_, layer, kvh); }
  const uint16_t* value_head(size_t layer, size_t kvh) const { return half_head(values_, layer, kvh); }
  size_t n_kv_heads() const { return kv_dim_ / head_dim_; }
  size_t head_stride() const { return n_ctx_ * head_dim_; }  // from one head's rows to the next head's
  // F16 format: the slots of held positions (ascending runs are found in one walk), in `buffer`
  // unless the layer has no holes (then the positions themselves).
  std::span<const uint32_t> slots(size_t layer, std::span<const uint32_t> positions,
                                  std::vector<uint32_t>& buffer) const;
  // Erases the positions the layer does not hold (keys a policy lists beyond what the layer keeps).
  void keep_held(size_t layer, std::vector<uint32_t>& positions) const;
  // Any format: the K or V row (kv_dim floats) as attention sees it now. Policies that score or
  // summarize cached keys read them through these, never through key()/value() (F16 only).
  void read_key(size_t layer, size_t pos, float* out) const;
  void read_value(size_t layer, size_t pos, float* out) const;
  // Any format: KV head kvh of the K or V row (head_dim floats).
  void read_head(size_t layer, size_t pos, size_t kvh, bool keys, float* out) const;
  // Any format: q (head_dim floats) . KV head kvh of the cached key (decoded). Attention scores
  // keys of 4 or 2 bits against the query rounded to 8 bits, within half a query step of this
  // (kv_codes.h: coded_key_score).
  float key_dot(size_t layer, size_t pos, size_t kvh, const float* q) const;

  // Writing a batch at positions pos0..pos0+n_tok-1: begin_batch, then per layer hold_* (which
  // gives each written position its slot), store() each written row (from any thread, distinct
  // positions) and commit().
  void begin_batch(size_t pos0, size_t n_tok);
  void store(size_t layer, size_t pos, const float* k, const float* v, KvStorage storage);
  void commit(size_t layer, size_t pos0, size_t n_tok);

  // After writing new positions, or to drop a suffix (also from the layers' held positions).
  void set_size(size_t n);
  void clear() { set_size(0); }

  bool holds_all(size_t layer) const { return !partial_[layer]; }
  // Fraction of the cached positions this layer holds (1 without holes; 1 when empty).
  double held_fraction(size_t layer) const {
    return holds_all(layer) || n_used_ == 0 ? 1.0
                                            : static_cast<double>(held(layer, n_used_ - 1).size()) / n_used_;
  }
  // The positions a layer holds up to and including `pos` (below size() or in the batch being
  // written), ascending.
  std::span<const uint32_t> held(size_t layer, size_t pos) const;
  // The batch at positions pos0.. wrote only `stored` (ascending) at this layer.
  void hold_only(size_t layer, size_t pos0, std::span<const uint32_t> stored);
  // The batch at positions pos0..pos0+n_tok-1 wrote all of them (a no-op on layers without holes).
  void hold_all(size_t layer, size_t pos0, size_t n_tok);
  void evict(size_t layer, std::span<const uint32_t> positions);
  // F16, while empty (a sequence is about to start): small pages when its policies evict, so that
  // the cache's memory follows the rows held from their first write (a 2 MiB page becomes resident
  // whole, and a layer's first eviction comes only after a batch); else huge pages again (an
  // earlier sequence's evictions left the advice for small ones).
  void use_small_pages(bool small);

  // Quantized formats, for attention: where the K or V row of a held position is.
  KvRowRef key_row(size_t layer, size_t pos) const { return row_ref(layer, pos, ring_k_, pinned_k_, true); }
  KvRowRef value_row(size_t layer, size_t pos) const {
    return row_ref(layer, pos, ring_v_, pinned_v_, false);
  }
  // KIVI: the per-channel key ranges (kv_dim) of the block holding `pos`.
  const CodeRange* key_block_ranges(size_t layer, size_t pos) const {
    return static_ranges() ? &static_key_[layer * kv_dim_]
                           : &key_block_ranges_[(layer * n_blocks_ + pos / format_.group) * kv_dim_];
  }
  size_t n_groups() const { return n_groups_; }
  // Quantized formats: bytes from one coded row to the next, and CodeRanges from one row's
  // per-token group ranges to the next (0: static ranges, shared by all rows).
  size_t code_row_bytes() const { return row_bytes_; }
  size_t range_stride() const { return static_ranges() ? 0 : n_groups_; }
  // How many of positions pos..pos+max_len-1 (at least 1: pos, coded) have K and V coded at pos's
  // width: one run of attn_codes (with dynamic KIVI key ranges, one query set per key block).
  size_t coded_run(size_t layer, size_t pos, size_t max_len) const;
  // The segments of KV head kvh in K (keys) or V rows.
  std::span<const KvSegment> segments(size_t kvh, bool keys) const {
    return keys && format_.channel_keys ? std::span(head_segments_).subspan(kvh, 1) : group_segments_[kvh];
  }
  bool full_precision(size_t layer, size_t pos) const { return kind_[layer * n_ctx_ + pos] == kFull; }
  bool low_precision(size_t layer, size_t pos) const { return kind_[layer * n_ctx_ + pos] == kCodedLow; }

 private:
  enum : uint8_t { kAbsent = 0, kCoded = 1, kFull = 2, kCodedLow = 3 };
  void list_held(size_t layer, size_t up_to);  // a layer gets its first hole
  static constexpr uint32_t kNoSlot = UINT32_MAX;
  size_t slot(size_t layer, size_t pos) const;  // F16: the row of a held position, else kNoSlot
  // Drops the held positions from `pos` on (ascending `held`) and their slots; returns how many stay.
  static size_t forget_held_from(std::vector<uint32_t>& held, std::vector<uint32_t>& slot_of, size_t pos);
  // F16, after an eviction: the kept rows move down to their new slots (the first `unmoved` are
  // in place) and the rows freed at the end go back to the system.
  void move_rows(size_t layer, std::span<const uint32_t> before, std::span<const uint32_t> kept,
                 size_t unmoved);
  void grow_window(size_t pos0, size_t n_tok);
  KvRowRef row_ref(size_t layer, size_t pos, const std::vector<uint16_t>& ring,
                   const std::vector<std::vector<uint16_t>>& pinned, bool keys) const;
  uint16_t* ring_row(std::vector<uint16_t>& ring, size_t layer, size_t pos) {
    return &ring[(layer * window_ + pos % window_) * kv_dim_];
  }
  const uint16_t* ring_row(const std::vector<uint16_t>& ring, size_t layer, size_t pos) const {
    return &ring[(layer * window_ + pos % window_) * kv_dim_];
  }
  // Dynamic per-token groups: each group's range of x at `bits`, written to `ranges` (returned).
  const CodeRange* measure_groups(const float* x, unsigned bits, CodeRange* ranges) const;
  // Packs the codes of row x: ranges per channel (KIVI keys, by head) or per group segment.
  void code_row(const float* x, unsigned bits, uint8_t* codes, const CodeRange* ranges,
                bool per_channel) const;
  // The per-token group ranges of a coded row.
  const CodeRange* group_ranges(const ZeroedArray<CodeRange>& dynamic, const std::vector<CodeRange>& fixed,
                                size_t layer, size_t row) const {
    return static_ranges() ? &fixed[layer * n_groups_] : &dynamic[row * n_groups_];
  }
  // Bytes of one layer's K and V of a coded token at `bits`, ranges and kind included.
  size_t coded_token_bytes(unsigned bits) const;
  void code_key_block(size_t layer, size_t block);

  size_t n_layers_, n_ctx_, kv_dim_, head_dim_;
  KvFormat format_;
  size_t n_used_ = 0;
  const uint16_t* half_head(const LargePageBuffer& rows, size_t layer, size_t kvh) const {
    return reinterpret_cast<const uint16_t*>(rows.data()) + (layer * n_kv_heads() + kvh) * head_stride();
  }
  uint16_t* half_head(LargePageBuffer& rows, size_t layer, size_t kvh) {
    return reinterpret_cast<uint16_t*>(rows.data()) + (layer * n_kv_heads() + kvh) * head_stride();
  }
  // F16 format: [layer][kv head][slot][head_dim], zero pages until written (resident memory grows
  // with the positions held, not with the context reserved). 2 MiB pages, except on layers with
  // holes: one KV head's rows span about a huge page (1 MiB at 8K positions of head dim 64), so
  // huge pages would keep the whole reserve resident however few rows the layer holds.
  LargePageBuffer keys_, values_;
  std::vector<uint32_t> all_positions_;      // 0, 1, ..., n_ctx - 1: held() of layers without holes
  std::vector<uint8_t> partial_;             // per layer: has holes, positions listed in held_
  std::vector<std::vector<uint32_t>> held_;  // per partial layer, ascending; F16: index = slot
  // Per partial layer, per position (n_ctx): its index in held_ (its F16 slot), or kNoSlot. The
  // key lists of selecting policies are looked up key by key at every step (slots, keep_held):
  // a search in held_ per key was ~10% of an H2O decode step once its evictions left holes.
  std::vector<std::vector<uint32_t>> slot_of_;
  // slot_of_ of the layer's held entries from index `from` on, after they changed.
  void index_held(size_t layer, size_t from);

  // Quantized formats.
  size_t row_bytes_ = 0, n_groups_ = 0, n_blocks_ = 0, window_ = 0;
  std::vector<KvSegment> head_segments_;                // per KV head: the whole head
  std::vector<std::vector<KvSegment>> group_segments_;  // per KV head: per-token groups within it
  // Sized for the whole context, resident as far as positions are written (4 KiB pages).
  ZeroedArray<uint8_t> key_codes_, value_codes_;      // [layer][pos][row_bytes]
  ZeroedArray<CodeRange> key_ranges_, value_ranges_;  // [layer][pos][group] (keys: per-token mode)
  ZeroedArray<CodeRange> key_block_ranges_;           // [layer][block][kv_dim] (KIVI)
  std::vector<CodeRange> static_key_, static_value_;  // static: [layer][kv_dim] (KIVI keys) or [layer][group]
  std::vector<uint8_t> kind_;                         // [layer][pos]: kAbsent, kCoded, kFull
  std::vector<uint16_t> ring_k_, ring_v_;             // [layer][window][kv_dim]: the recent tokens in F16
  std::vector<std::vector<uint32_t>> pinned_pos_;     // per layer, ascending: full-precision tokens
  std::vector<std::vector<uint16_t>> pinned_k_, pinned_v_;
  std::vector<size_t> keys_coded_to_;  // per layer: KIVI key blocks below this position are coded
  size_t window_from_ = 0;             // positions >= this read from the window (this batch)
};

}  // namespace ts
