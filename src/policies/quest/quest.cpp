#include "policies/quest/quest.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/simd_ops.h"
#include "model/model.h"
#include "runtime/kv_cache.h"

namespace ts {

PolicyOptionList QuestKeys::options() {
  return KeyBudget::options() +
         PolicyOptionList{
             integer_option("page", 1, 1u << 16, "16", "positions per page (min/max key bounds)"),
             integer_option("shared", 0, 1, "0", "1: one selection per KV head's group"),
             choice_option("bounds", {"f32", "i8"}, "the page bounds' precision")};
}

QuestKeys::QuestKeys(PolicyOptions& options)
    : Policy(options.spec()),
      budget_(options, -1),
      page_(*options.integer("page")),
      shared_(*options.integer("shared") == 1),
      int8_bounds_(options.choice<bool>("bounds", {false, true})) {}

void QuestKeys::bind(const Model& model) {
  budget_.bind(model, name());
  head_dim_ = model.config().head_dim;
  group_ = model.config().n_heads / model.config().n_kv_heads;
  TS_CHECK(!int8_bounds_ || 2 * head_dim_ <= kI8PairsMaxWidth, "policy ", name(),
           ": bounds=i8 needs a head dimension of at most ", kI8PairsMaxWidth / 2, ", not ", head_dim_);
  key_.resize(size_t{model.config().n_kv_heads} * head_dim_);
  page_bounds_.resize(size_t{model.config().n_kv_heads} * 2 * head_dim_);
  layers_.assign(model.config().n_layers, {});
  for (LayerPages& l : layers_) l.heads.resize(model.config().n_kv_heads);
}

void QuestKeys::truncate(size_t n_past) {
  for (LayerPages& l : layers_) l.ready = std::min(l.ready, n_past / page_);
  scored_rows_ = 0;  // a step's scores are for the positions before the rewind
}

// Bounds of the pages complete before the batch's last query's page, from the cached keys.
void QuestKeys::prepare_keys(const QueryRows& q) {
  LayerPages& lp = layers_[q.layer];
  TS_CHECK(q.cache->holds_all(q.layer), "policy ", name(), ": the cache of layer ", q.layer,
           " has holes (another policy evicted or skipped tokens)");
  const size_t last_pos = q.pos0 + (*q.rows)[q.rows->size() - 1];
  const size_t need = last_pos / page_, hd = head_dim_, width = 2 * hd, n_kv = lp.heads.size();
  for (size_t p = lp.ready; p < need; ++p) {
    for (size_t kvh = 0; kvh < n_kv; ++kvh) {
      std::fill_n(&page_bounds_[kvh * width], hd, -INFINITY);
      std::fill_n(&page_bounds_[kvh * width + hd], hd, INFINITY);
    }
    for (size_t j = p * page_; j < (p + 1) * page_; ++j) {
      q.cache->read_key(q.layer, j, key_.data());
      for (size_t kvh = 0; kvh < n_kv; ++kvh) {
        float* hi = &page_bounds_[kvh * width];
        float* lo = hi + hd;
        const float* k = &key_[kvh * hd];
        for (size_t c = 0; c < hd; ++c) {
          hi[c] = std::max(hi[c], k[c]);
          lo[c] = std::min(lo[c], k[c]);
        }
      }
    }
    for (size_t kvh = 0; kvh < n_kv; ++kvh) store_page(lp.heads[kvh], p, need, &page_bounds_[kvh * width]);
  }
  lp.ready = std::max(lp.ready, need);

  // A decode step's rows (few): every list's page bounds now, a KV head's lists in one product.
  constexpr size_t kScoredRows = 4, kPagesPerItem = 64;
  const size_t n_rows = q.rows->size(), per_kv = shared_ ? 1 : group_;
  const size_t lists = n_kv * per_kv;  // per row
  scored_rows_ = 0;
  if (n_rows > kScoredRows || need == 0) return;
  scored_parts_.resize(n_rows * lists * width);
  if (int8_bounds_) {
    scored_parts_i16_.resize(n_rows * lists * width);
    scored_parts_scale_.resize(n_rows * lists);
  }
  scored_pos_.resize(n_rows);
  for (size_t i = 0; i < n_rows; ++i) {
    scored_pos_[i] = q.pos0 + (*q.rows)[i];
    // List l's query heads: head l % lists, or (shared) the group of KV head l % lists.
    for (size_t l = i * lists; l < (i + 1) * lists; ++l) {
      bound_parts(q.query(i, l % lists * (group_ / per_kv)).data(), group_ / per_kv,
                  &scored_parts_[l * width]);
      if (int8_bounds_)
        scored_parts_scale_[l] =
            round_query_i16(&scored_parts_[l * width], width, &scored_parts_i16_[l * width]);
    }
  }
  scored_.resize(n_rows * lists * need);
  const size_t chunks = (need + kPagesPerItem - 1) / kPagesPerItem;
  const auto score_items = [&](size_t b, size_t e, int) {
    for (size_t item = b; item < e; ++item) {
      const size_t i = item / (n_kv * chunks), kvh = item / chunks % n_kv,
                   begin = item % chunks * kPagesPerItem;
      const size_t first_list = i * lists + kvh * per_kv;
      score_pages(lp.heads[kvh], begin, std::min(begin + kPagesPerItem, need), per_kv,
                  &scored_parts_[first_list * width],
                  int8_bounds_ ? &scored_parts_i16_[first_list * width] : nullptr,
                  int8_bounds_ ? &scored_parts_scale_[first_list] : nullptr,
                  &scored_[first_list * need + begin], need);
    }
  };
  parallel_for(q.pool, n_rows * n_kv * chunks, score_items);
  scored_layer_ = q.layer;
  scored_lists_ = lists;
  scored_pages_ = need;
  scored_rows_ = n_rows;
}

void QuestKeys::store_page(PageBounds& b, size_t p, size_t pages, const float* bounds) const {
  const size_t width = 2 * head_dim_;
  if (!int8_bounds_) {
    if (b.floats.size() < pages * width) b.floats.resize(pages * width);
    std::copy_n(bounds, width, &b.floats[p * width]);
    return;
  }
  const size_t blocks = (pages + kF16Block - 1) / kF16Block, block_stride = width * kF16Block;
  if (b.scales.size() < blocks * kF16Block) {
    b.codes.resize(blocks * block_stride);
    b.scales.resize(blocks * kF16Block);
  }
  float amax = 0.0f;
  for (size_t x = 0; x < width; ++x) amax = std::max(amax, std::fabs(bounds[x]));
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  int8_t* row = &b.codes[p / kF16Block * block_stride + p % kF16Block * 2];
  for (size_t x = 0; x < width; ++x) {  // max (the first half) rounded up, min down
    const float code = x < head_dim_ ? std::ceil(bounds[x] * inv) : std::floor(bounds[x] * inv);
    row[x / 2 * 2 * kF16Block + x % 2] = static_cast<int8_t>(std::clamp(code, -127.0f, 127.0f));
  }
  b.scales[p] = amax / 127.0f;
}

void QuestKeys::score_pages(const PageBounds& b, size_t begin, size_t end, size_t n_lists, const float* parts,
                            const int16_t* parts_i16, const float* parts_scales, float* out,
                            size_t out_stride) const {
  const size_t width = 2 * head_dim_;
  if (!int8_bounds_) {  // the lists' bounds in one product: several pages' chains at once
    ops().gemm_f32(b.floats.data() + begin * width, end - begin, parts, width, n_lists, width, out,
                   out_stride);
    return;
  }
  for (size_t l = 0; l < n_lists; ++l)
    ops().dot_i8_pairs(b.codes.data() + begin / kF16Block * width * kF16Block, width * kF16Block,
                       b.scales.data() + begin, end - begin, parts_i16 + l * width, parts_scales[l], width,
                       out + l * out_stride);
}

void QuestKeys::bound_parts(const float* q, size_t n, float* parts) const {
  const size_t hd = head_dim_;
  std::fill_n(parts, 2 * hd, 0.0f);
  for (size_t g = 0; g < n; ++g)
    for (size_t c = 0; c < hd; ++c) {
      const float x = q[g * hd + c];
      parts[c] += std::max(x, 0.0f);
      parts[hd + c] += std::min(x, 0.0f);
    }
}

void QuestKeys::select_keys(const KeyQuery& q, std::span<const uint32_t> candidates,
                            std::vector<uint32_t>& keys) const {
  // prepare_keys checked the layer holds every position: the candidates are 0..pos, or the last
  // positions up to pos on a sliding-window layer (whose attention drops what is selected before them).
  TS_CHECK(!candidates.empty() && candidates.back() == q.pos &&
               candidates.size() == q.pos + 1 - candidates.front(),
           "policy ", name(), ": the cache of layer ", q.layer, " has holes");
  const size_t hd = head_dim_, width = 2 * hd, current = q.pos / page_;
  const PageBounds& bounds = layers_[q.layer].heads[q.kv_head];
  // The current page's tokens count towards the budget; earlier pages fill the rest.
  const size_t budget = budget_.budget(q.pos), in_current = q.pos % page_ + 1;
  const size_t more_pages = budget > in_current ? (budget - in_current + page_ - 1) / page_ : 0;
  thread_local std::vector<uint32_t> pages, chosen;
  thread_local std::vector<float> own, parts;
  thread_local std::vector<int16_t> parts_i16;
  const size_t first = std::min<size_t>(candidates.front() / page_, current);  // the window's first page
  pages.resize(current - first);
  std::iota(pages.begin(), pages.end(), static_cast<uint32_t>(first));
  std::span<const float> scores;
  const size_t row = static_cast<size_t>(
      std::find(scored_pos_.begin(), scored_pos_.begin() + scored_rows_, q.pos) - scored_pos_.begin());
  if (scored_rows_ > 0 && q.layer == scored_layer_ && row < scored_rows_) {  // prepare_keys scored them
    const size_t list = shared_ ? q.kv_head : q.head;
    scores = std::span<const float>(scored_).subspan((row * scored_lists_ + list) * scored_pages_ + first,
                                                     current - first);
  } else {
    parts.resize(width);
    parts_i16.resize(width);
    bound_parts(q.q.data(), q.n_heads, parts.data());
    const float parts_scale = int8_bounds_ ? round_query_i16(parts.data(), width, parts_i16.data()) : 0.0f;
    const size_t from = int8_bounds_ ? first / kF16Block * kF16Block : first;  // whole blocks of int8 bounds
    own.resize(current - from);
    score_pages(bounds, from, current, 1, parts.data(), parts_i16.data(), &parts_scale, own.data(), 0);
    scores = std::span<const float>(own).subspan(first - from);
  }
  select_top_keys(pages, scores, more_pages, 0, chosen);
  chosen.push_back(static_cast<uint32_t>(current));
  // The sinks, then the chosen pages' positions, ascending; positions below the sinks' end are
  // skipped so that none repeats.
  const uint32_t sinks = static_cast<uint32_t>(std::min(budget_.sinks(), q.pos + 1));
  const auto page_positions = [&](uint32_t p) {  // [begin, end) of page p's positions, not sinks
    const auto end = static_cast<uint32_t>(std::min((p + 1) * page_, q.pos + 1));
    return std::pair{std::min(std::max<uint32_t>(static_cast<uint32_t>(p * page_), sinks), end), end};
  };
  size_t n_keys = sinks;
  for (const uint32_t p : chosen) {
    const auto [begin, end] = page_positions(p);
    n_keys += end - begin;
  }
  keys.resize(n_keys);  // run by run: a push_back per position made this ~6% of a per-head decode step
  std::iota(keys.begin(), keys.begin() + sinks, 0u);
  auto at = keys.begin() + sinks;
  for (const uint32_t p : chosen) {
    const auto [begin, end] = page_positions(p);
    std::iota(at, at + (end - begin), begin);
    at += end - begin;
  }
}

}  // namespace ts
