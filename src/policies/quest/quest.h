#pragma once
// Quest (Tang et al. 2024): the cache is cut into pages of `page` positions; each complete page
// keeps the element-wise min and max of its keys per channel, and a query scores a page by the
// upper bound sum_c max(q_c·min_c, q_c·max_c) of its logits there. Each query head reads its own
// (partial) page plus as many best-scoring earlier pages as the rest of budget(pos) needs, and
// the sinks. The full cache is kept. (Paper 001's code used |q|·max only and let the simulation
// see keys of future tokens in the current page; this is the original bound, causal.)
//
// Since max ≥ min, the bound is q⁺·max + q⁻·min (q⁺, q⁻ the positive and negative parts of q):
// one dot product of [q⁺, q⁻] with the page's [max, min]. shared=1 lets the query heads of a KV
// head share one selection ranked by the sum of their bounds, which is the same dot product with
// the group's summed parts; the group then reads as many keys as one head's budget, instead of
// the union of its heads' lists (the paper selects per query head; shared=0, the default).
//
// bounds=i8 keeps a page's [max, min] as int8 codes with one scale per page (max rounded up, min
// down, so the bound stays above the float one up to rounding) and scores them against the
// parts rounded to 13-bit integers (dot_i8_pairs): F32 bounds are an eighth of an F16 cache's
// bytes, read in full at every decode step (23 MB a token on SmolLM2 at 8K); int8 a thirty-second.
#include "policies/key_budget.h"
#include "runtime/policy.h"

namespace ts {

class QuestKeys final : public Policy {
 public:
  explicit QuestKeys(PolicyOptions& options);
  static PolicyOptionList options();  // declared once: parser, help, Python and README

  void bind(const Model& model) override;
  std::vector<HookClaim> claims() const override { return {{Hook::SelectKeys, budget_.layers()}}; }
  void truncate(size_t n_past) override;
  void prepare_keys(const QueryRows& q) override;
  void select_keys(const KeyQuery& q, std::span<const uint32_t> candidates,
                   std::vector<uint32_t>& keys) const override;
  bool selects_per_group() const override { return shared_; }

 private:
  // One KV head's page bounds, per page max[head_dim] then min[head_dim]: floats [page][2 head_dim],
  // or (bounds=i8) int8 codes in dot_i8_pairs' layout, [page block][head_dim][kF16Block][2], and a
  // scale per page (whole blocks of pages).
  struct PageBounds {
    std::vector<float> floats;
    std::vector<int8_t> codes;
    std::vector<float> scales;
  };
  struct LayerPages {
    size_t ready = 0;  // pages whose bounds are known
    std::vector<PageBounds> heads;
  };
  KeyBudget budget_;
  size_t page_ = 16;
  bool shared_ = false;
  bool int8_bounds_ = false;
  size_t head_dim_ = 0, group_ = 1;  // group_: query heads per KV head
  std::vector<LayerPages> layers_;
  std::vector<float> key_;          // one cached key row, decoded (prepare_keys runs on one thread)
  std::vector<float> page_bounds_;  // one page's bounds of every KV head, before they are stored
  // The page bounds of a decode step's few rows, computed by prepare_keys for every list of a KV
  // head at once and across the pool: each KV head's bounds are then read once per step instead
  // of once per query head (on SmolLM2 at 8K, 23 MB of bounds a token). [row][list][page], lists
  // per row (scored_lists_): query heads (or KV heads with shared=1), pages per list: scored_pages_ (the
  // pages before the last row's); scored_rows_ = 0 when a batch has many rows (each list then scores its own
  // in select_keys).
  std::vector<float> scored_, scored_parts_;  // scored_parts_: the lists' bound_parts, width apart
  std::vector<int16_t> scored_parts_i16_;     // ... rounded for int8 bounds, with their scales
  std::vector<float> scored_parts_scale_;
  std::vector<size_t> scored_pos_;  // the rows' positions
  size_t scored_layer_ = 0, scored_rows_ = 0, scored_lists_ = 0, scored_pages_ = 0;

  // [sum of the positive parts, sum of the negative parts] of the n query vectors at q (head_dim
  // floats each): the vector whose dot product with a page's [max, min] is its bound.
  void bound_parts(const float* q, size_t n, float* parts) const;
  // Stores page p's [max, min] (2 head_dim floats) for a KV head, growing its storage to `pages`.
  void store_page(PageBounds& b, size_t p, size_t pages, const float* bounds) const;
  // The bounds of pages [begin, end) (begin a multiple of kF16Block with int8 bounds) against
  // n_lists lists' parts (2 head_dim floats each, consecutive; with int8 bounds, parts_i16 and
  // their scales) into out[l * out_stride + (0 .. end - begin)].
  void score_pages(const PageBounds& b, size_t begin, size_t end, size_t n_lists, const float* parts,
                   const int16_t* parts_i16, const float* parts_scales, float* out, size_t out_stride) const;
};

}  // namespace ts
