// The attention step of ForwardPass::attention_block, per sequence: dense over the held keys (attend) or over
// the keys the policies list (attend_listed). Both cut their work into (token, KV head, key
// chunk) items when there are too few (token, KV head) pairs to keep the threads busy (decode),
// and merge the chunks' online-softmax partials afterwards (flash-decoding).
#include <algorithm>
#include <cmath>
#include <functional>

#include "kernels/simd_ops.h"
#include "runtime/forward_pass.h"
#include "runtime/kv_attention.h"

namespace ts {
namespace {
// Fewest keys per attention work item: below this, merging partial results costs more than it saves.
constexpr size_t kMinKeyChunk = 256;
// The merge of partial results is shared only in slices of at least this many (token, KV head) pairs.
constexpr size_t kMinCombinePairs = 16;
// Positions per query tile (attend): rows in one aligned run of kQueryTile positions share keys.
constexpr size_t kQueryTile = 8;
// Rows per pass of attend over a long call (a prompt ranked whole): bounds the partial results,
// which for every row at once would be the largest scratch of the call (SmolLM2 at 8192: 38 MB).
constexpr size_t kAttendRows = 512;
// Rows per pass of attend_listed (see there): enough (token, KV head) streams to keep the threads
// busy with whole lists (at least kMinListedRows), few enough that the lists of one pass, and the
// attention probabilities an observer reads, stay within kListedBytes (at most kListedRows).
constexpr size_t kListedRows = 64, kMinListedRows = 8;
constexpr size_t kListedBytes = size_t{8} << 20;

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

// attend's queries per (tile, KV head): the group's heads of each row of a tile.
size_t tile_queries(bool tiled, size_t group) { return (tiled ? kQueryTile : 1) * group; }

// Item i of n work items whose cost grows with their number (causal attention: later positions
// have more keys), in the order 0, n-1, 1, n-2, ...: the pool cuts that order into contiguous
// chunks, which then hold about as much work as each other (in item order the last chunk of a
// prefill's attention would hold the most keys, and the region would wait for it).
size_t balanced(size_t i, size_t n) { return i % 2 == 0 ? i / 2 : n - 1 - i / 2; }

struct MergedSoftmax {
  float max, denom;
};

// One query's output from its partials over disjoint key chunks: part ci sits at index
// first + ci * step of m (max score), l (sum of exp(score - m); 0 = the chunk had no keys) and
// acc (head_dim floats per part, the unnormalized value sum). No keys at all: output 0.
// Returns the merged maximum and softmax denominator (0: no keys).
MergedSoftmax merge_parts(const std::vector<float>& m, const std::vector<float>& l,
                          const std::vector<float>& acc, size_t first, size_t step, size_t n_parts,
                          size_t head_dim, float* out) {
  float mx = -INFINITY;
  for (size_t ci = 0, p = first; ci < n_parts; ++ci, p += step)
    if (l[p] > 0.0f) mx = std::max(mx, m[p]);
  std::fill(out, out + head_dim, 0.0f);
  float denom = 0.0f;
  for (size_t ci = 0, p = first; ci < n_parts; ++ci, p += step) {
    if (l[p] <= 0.0f) continue;
    const float w = std::exp(m[p] - mx);
    denom += w * l[p];
    for (size_t x = 0; x < head_dim; ++x) out[x] += w * acc[p * head_dim + x];
  }
  if (denom > 0.0f)
    for (size_t x = 0; x < head_dim; ++x) out[x] /= denom;
  return {mx, denom};
}
}  // namespace

// The keys a token at `pos` attends at `layer`: those the layer holds up to pos, inside its
// sliding window if it has one. The model's window, not a policy's choice: it narrows whatever
// keys the policies hold or select.
std::span<const uint32_t> ForwardPass::attended_keys(const KvCache& cache, size_t layer, size_t pos) const {
  const std::span<const uint32_t> held = cache.held(layer, pos);
  const size_t window = model_.config().layers[layer].window;
  if (window == 0 || pos < window) return held;
  const auto first = std::lower_bound(held.begin(), held.end(), pos + 1 - window);
  return held.subspan(static_cast<size_t>(first - held.begin()));
}

// Keys per work item for `streams` key streams of at most n_keys_max keys: whole streams when
// there are enough of them for the threads, else chunks of at least
// kMinKeyChunk keys. Sizes the partials for (stream, chunk or one of
// extra_parts, query), with `queries` queries per stream (default: the query heads of a group),
// for at most sized_streams streams at once.
ForwardPass::KeyChunks ForwardPass::plan_key_chunks(AttentionParts& p, size_t streams, size_t n_keys_max,
                                                    size_t queries, size_t extra_parts,
                                                    size_t sized_streams) {
  const size_t group = model_.config().n_heads / model_.config().n_kv_heads, hd = model_.config().head_dim;
  if (queries == 0) queries = group;
  const size_t want_tasks = 4 * static_cast<size_t>(pool_.size());
  size_t chunk = n_keys_max;
  if (streams < want_tasks)
    chunk = std::max(kMinKeyChunk, ceil_div(n_keys_max, ceil_div(want_tasks, streams)));
  chunk = std::max<size_t>(chunk, 1);
  const size_t n_chunks = ceil_div(std::max<size_t>(n_keys_max, 1), chunk),
               parts = std::min(streams, sized_streams) * (n_chunks + extra_parts) * queries;
  p.m.resize(parts);
  p.l.resize(parts);
  p.acc.resize(parts * hd);
  // A short cache (early decode steps) is cheaper to attend inline than to share.
  const size_t min_items = streams * n_keys_max < kMinSharedAttentionKeys ? streams * n_chunks : 1;
  return {chunk, n_chunks, min_items};
}

// Flash-style attention of a slice's rows.attn over every key the layer holds up to each token's position.
// The keys of a token are a prefix of the layer's held rows, read as one contiguous stream: on the
// F16 cache the j-th held position is in slot j (rows 0..pos on a layer without holes). Quantized
// caches read the held positions.
//
// On F16 caches the rows go in query tiles: the rows whose positions share pos / kQueryTile.
// A tile's queries of one KV head attend together to the keys before its aligned first position
// (read once per tile instead of once per row), and each row's remaining keys (its tail, up to its
// own position) are attended in the merge step. The split depends only on positions, so a row's
// result does not depend on how tokens were cut into batches. Work items are (tile, KV head, key
// chunk); on quantized caches a tile is one row and its keys are all in the chunks.
void ForwardPass::attend(Slice& s, size_t layer, AttentionParts& p, bool inline_only) {
  const ModelConfig& c = model_.config();
  const size_t pos0 = s.pos0, group = c.n_heads / c.n_kv_heads;
  const KvCache& cache = s.cache();
  const RowSet& rows = s.rows.attn;
  // Rows of a sliding-window layer start their keys at different positions: no shared tiles.
  const bool tiled = p.tiled = !cache.quantized() && c.layers[layer].window == 0;
  p.tile_first_row.clear();
  p.row_tile.resize(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i == 0 || !tiled || (pos0 + rows[i]) / kQueryTile != (pos0 + rows[i - 1]) / kQueryTile)
      p.tile_first_row.push_back(i);
    p.row_tile[i] = p.tile_first_row.size() - 1;
  }
  const size_t n_tiles = p.tile_first_row.size();
  p.tile_first_row.push_back(rows.size());
  // The keys a tile attends together: before its aligned first position, or all of a lone row's
  // (looked up once per tile: on a windowed layer each lookup is a search of the held positions).
  p.tile_keys.resize(n_tiles);
  size_t n_keys_max = 0;
  for (size_t t = 0; t < n_tiles; ++t) {
    const size_t first = p.tile_first_row[t];
    const size_t aligned = (pos0 + rows[first]) / kQueryTile * kQueryTile;
    p.tile_keys[t] = !tiled        ? attended_keys(cache, layer, pos0 + rows[first])
                     : aligned > 0 ? cache.held(layer, aligned - 1)
                                   : std::span<const uint32_t>{};
    n_keys_max = std::max(n_keys_max, p.tile_keys[t].size());
  }
  // The chunking follows the whole call (so it does not depend on the passes); the partials are
  // sized for one pass. Passes of equal tiles, each at most about kAttendRows rows.
  const size_t max_tiles = std::max<size_t>(1, kAttendRows / (tiled ? kQueryTile : 1));
  const size_t n_passes = ceil_div(n_tiles, max_tiles), tiles_per_pass = ceil_div(n_tiles, n_passes);
  const KeyChunks plan = plan_key_chunks(p, n_tiles * c.n_kv_heads, n_keys_max, tile_queries(tiled, group),
                                         tiled ? 1 : 0, tiles_per_pass * c.n_kv_heads);
  for (size_t t0 = 0; t0 < n_tiles; t0 += tiles_per_pass)
    attend_tiles(s, layer, p, plan, t0, std::min(n_tiles, t0 + tiles_per_pass), inline_only);
}

// attend's work on query tiles t0..t1: each (tile, KV head, key chunk)'s partial result, then each
// row's tail and merge into its output.
void ForwardPass::attend_tiles(Slice& s, size_t layer, AttentionParts& p, const KeyChunks& plan, size_t t0,
                               size_t t1, bool inline_only) {
  const ModelConfig& c = model_.config();
  const size_t d = c.q_dim, hd = c.head_dim, pos0 = s.pos0;
  const KvCache& cache = s.cache();
  // Each row's output over its own query (see attention_block), once every read of it is done.
  float* out = &q_[s.q0 * d];
  const float* q_rows = out;
  const size_t group = c.n_heads / c.n_kv_heads;
  const SimdOps& k = ops();
  const RowSet& rows = s.rows.attn;
  // Work items over the pool, or all on this thread when the caller already shares slices out.
  const auto for_items = [&](size_t n, const std::function<void(size_t, size_t, int)>& fn, size_t min_items) {
    if (inline_only) return fn(0, n, 0);
    pool_.parallel_for(n, fn, min_items);
  };
  // The keys of row i: positions 0..pos (no holes) or the held ones, inside the layer's window.
  const auto keys_of = [&](size_t i) { return attended_keys(cache, layer, pos0 + rows[i]); };
  // F16: KV head kvh's j-th held key at key_rows + kvh * head_stride + j * hd (head-major).
  const uint16_t* key_rows = cache.quantized() ? nullptr : cache.key_head(layer, 0);
  const uint16_t* value_rows = cache.quantized() ? nullptr : cache.value_head(layer, 0);
  const size_t head_stride = cache.head_stride();
  const uint32_t* held_base = cache.held(layer, 0).data();
  const size_t n_queries = tile_queries(p.tiled, group), tails = p.tiled ? 1 : 0;  // a tail per row
  const size_t streams = (t1 - t0) * c.n_kv_heads;
  const size_t chunk = plan.chunk, n_chunks = plan.n_chunks, slots = n_chunks + tails;
  const float scale = c.attn_scale;
  for_items(
      streams * n_chunks,
      [&](size_t b, size_t e, int) {
        thread_local std::vector<float> q_buf;  // a tile's queries of one KV head, side by side
        for (size_t task = b; task < e; ++task) {
          const size_t stream = balanced(task / n_chunks, streams), ci = task % n_chunks;
          const size_t t = t0 + stream / c.n_kv_heads, kvh = stream % c.n_kv_heads, i0 = p.tile_first_row[t];
          const size_t n_rows = p.tile_first_row[t + 1] - i0, n_q = n_rows * group;
          const std::span<const uint32_t> keys = p.tile_keys[t];
          const size_t start = ci * chunk, slot = (stream * slots + ci) * n_queries;
          float* m = &p.m[slot];
          float* l = &p.l[slot];
          if (start >= keys.size()) {
            std::fill(l, l + n_q, 0.0f);
            continue;
          }
          const size_t len = std::min(chunk, keys.size() - start);
          const float* q = &q_rows[i0 * d + kvh * group * hd];
          if (n_rows > 1) {
            q_buf.resize(n_q * hd);
            for (size_t r = 0; r < n_rows; ++r)
              std::copy_n(&q_rows[(i0 + r) * d + kvh * group * hd], group * hd, &q_buf[r * group * hd]);
            q = q_buf.data();
          }
          float* acc = &p.acc[slot * hd];
          if (cache.quantized()) {
            attend_coded(cache, layer, kvh, q, group, keys.subspan(start, len), scale, m, l, acc);
          } else {
            const size_t at = kvh * head_stride + (static_cast<size_t>(keys.data() - held_base) + start) * hd;
            k.attn_chunk(q, n_q, key_rows + at, value_rows + at, hd, len, hd, scale, m, l, acc);
          }
        }
      },
      plan.min_items);
  const size_t r0 = p.tile_first_row[t0], r1 = p.tile_first_row[t1];
  for_items((r1 - r0) * c.n_kv_heads,
            [&](size_t b, size_t e, int) {
              for (size_t pair = b; pair < e; ++pair) {
                const size_t i = r0 + pair / c.n_kv_heads, kvh = pair % c.n_kv_heads, t = p.row_tile[i];
                const size_t stream = (t - t0) * c.n_kv_heads + kvh;
                const size_t first = stream * slots * n_queries + (i - p.tile_first_row[t]) * group;
                if (tails) {  // keys after the tile's shared ones, up to this row's own position
                  const size_t from = p.tile_keys[t].size(), to = keys_of(i).size(),
                               at = first + n_chunks * n_queries;
                  if (to > from) {
                    const size_t row = kvh * head_stride + from * hd;
                    k.attn_chunk(&q_rows[i * d + kvh * group * hd], group, key_rows + row, value_rows + row,
                                 hd, to - from, hd, scale, &p.m[at], &p.l[at], &p.acc[at * hd]);
                  } else {
                    std::fill_n(&p.l[at], group, 0.0f);
                  }
                }
                for (size_t g = 0; g < group; ++g)
                  merge_parts(p.m, p.l, p.acc, first + g, n_queries, slots, hd,
                              &out[i * d + (kvh * group + g) * hd]);
              }
            },
            kMinCombinePairs);
}

// Attention of a slice's rows.attn over explicit key lists, for policies that select keys per (row, query
// head) or watch the attention probabilities: the positions a policy selects, else those the
// layer holds up to the token. The lists are chosen first; then each (row, KV head) gathers its
// keys once for the whole query group when the group's lists agree (holes, group-shared
// selections), else as the union of the group's lists, each row once with a mask of the heads
// that chose it (per-head selections overlap: at keep 0.5 the union of 3 heads' lists holds ~60%
// of the positions where the heads' own gathers would read 150%), in chunks as attend's when the
// threads need them (a union's chunks are ranges of positions). Lists that differ are gathered once
// per query head on the coded cache and for groups of more than 8 heads.
// When a policy watches the probabilities, each chunk's kernel also returns its numerators
// (relative to the chunk's max), rescaled to the whole list's softmax when the chunks merge.
// The lists, and the probabilities, go to the policies afterwards. No keys: output 0.
//
// A long batch goes through all of that in chunks of rows (the policies see each chunk as a batch
// of its own, in order), so the lists and probabilities held at once are a chunk's, not a
// prompt batch's: 512 rows' lists at depth 8K are ~75 MB on SmolLM2, more than an evicting
// policy's cache saves.
void ForwardPass::attend_listed(Slice& s, size_t layer) {
  const RowSet& rows = s.rows.attn;
  // A row's lists: a key position (and a probability) per position it may attend, per query head.
  const size_t row_bytes = model_.config().n_heads * (s.pos0 + s.n_tok) * (sizeof(uint32_t) + sizeof(float));
  const size_t max_rows = std::clamp(kListedBytes / row_bytes, kMinListedRows, kListedRows);
  const size_t n_chunks = ceil_div(rows.size(), max_rows), per_chunk = ceil_div(rows.size(), n_chunks);
  if (n_chunks == 1) return attend_listed_rows(s, layer, rows, 0);
  std::vector<uint32_t> chunk;
  for (size_t first = 0; first < rows.size(); first += per_chunk) {
    chunk.clear();
    for (size_t i = first; i < std::min(rows.size(), first + per_chunk); ++i) chunk.push_back(rows[i]);
    listed_rows_.set_list(chunk);
    attend_listed_rows(s, layer, listed_rows_, first);
  }
}

// attend_listed of `rows`, the rows.attn of slice s from its `first`-th on.
void ForwardPass::attend_listed_rows(Slice& s, size_t layer, const RowSet& rows, size_t first) {
  const ModelConfig& c = model_.config();
  const size_t d = c.q_dim, hd = c.head_dim, n_heads = c.n_heads, pos0 = s.pos0;
  KvCache& cache = s.cache();
  PolicyStack* policies = s.policies();
  float* out = &q_[(s.q0 + first) * d];  // over the queries, as attend_tiles'
  const float* q_rows = out;
  const size_t group = c.n_heads / c.n_kv_heads;
  const SimdOps& k = ops();
  AttentionParts& parts = parts_[0];
  const Policy* selector = policies ? policies->key_selector(layer) : nullptr;
  if (selector) policies->prepare_keys({layer, pos0, &rows, n_heads, hd, q_rows, &cache, &pool_});
  const bool watched = policies && policies->wants_attention(layer);
  const size_t tasks = rows.size() * n_heads;
  key_spans_.resize(tasks);
  if (selector) {
    // One list per (row, query head), or per (row, KV head) shared by the group.
    const size_t per_list = selector->selects_per_group() ? group : 1, n_lists = tasks / per_list;
    key_lists_.resize(std::max(key_lists_.size(), n_lists));
    pool_.parallel_for(n_lists, [&](size_t b, size_t e, int) {
      for (size_t at = b; at < e; ++at) {
        const size_t list_i = balanced(at, n_lists), task = list_i * per_list, i = task / n_heads,
                     h = task % n_heads, pos = pos0 + rows[i];
        std::vector<uint32_t>& list = key_lists_[list_i];
        list.clear();
        const std::span<const uint32_t> candidates = attended_keys(cache, layer, pos);
        selector->select_keys(
            {layer, pos, h, h / group, {&q_rows[i * d + h * hd], per_list * hd}, &cache, per_list},
            candidates, list);
        // A selector may add keys of its own (sinks, whole pages): none outside the window, none
        // the layer does not hold.
        const size_t window = c.layers[layer].window;
        if (window > 0 && pos + 1 > window)
          std::erase_if(list, [&](uint32_t j) { return j + window <= pos; });
        cache.keep_held(layer, list);
        for (size_t g = 0; g < per_list; ++g) key_spans_[task + g] = list;
      }
    });
  } else {
    for (size_t task = 0; task < tasks; ++task)
      key_spans_[task] = attended_keys(cache, layer, pos0 + rows[task / n_heads]);
  }

  // Gathers: the first query head of a run of n_q heads of one KV head that read the same list.
  const auto same_keys = [](std::span<const uint32_t> a, std::span<const uint32_t> b) {
    return a.data() == b.data() ? a.size() == b.size() : std::ranges::equal(a, b);
  };
  gathers_.clear();
  size_t n_keys_max = 0;
  const bool unions = !cache.quantized() && group <= 8;
  for (size_t pair = 0; pair < rows.size() * c.n_kv_heads; ++pair) {
    const size_t i = pair / c.n_kv_heads, h0 = (pair % c.n_kv_heads) * group;
    bool shared = true;
    for (size_t g = 1; g < group && shared; ++g)
      shared = same_keys(key_spans_[i * n_heads + h0], key_spans_[i * n_heads + h0 + g]);
    if (!shared && unions) {  // (lists that differ are not all empty)
      uint32_t begin = UINT32_MAX, end = 0;
      for (size_t g = 0; g < group; ++g) {
        const std::span<const uint32_t> list = key_spans_[i * n_heads + h0 + g];
        if (list.empty()) continue;
        begin = std::min(begin, list.front());
        end = std::max(end, list.back() + 1);
      }
      gathers_.push_back(
          {static_cast<uint32_t>(i * n_heads + h0), static_cast<uint32_t>(group), true, begin, end});
      n_keys_max = std::max<size_t>(n_keys_max, end - begin);  // positions, for a union
      continue;
    }
    const size_t n_q = shared ? group : 1;
    for (size_t h = h0; h < h0 + group; h += n_q) {
      gathers_.push_back({static_cast<uint32_t>(i * n_heads + h), static_cast<uint32_t>(n_q)});
      n_keys_max = std::max(n_keys_max, key_spans_[i * n_heads + h].size());
    }
  }
  const size_t n_gathers = gathers_.size();
  const KeyChunks plan = plan_key_chunks(parts, n_gathers, n_keys_max);
  const size_t chunk = plan.chunk, n_chunks = plan.n_chunks;
  if (watched) {
    attn_probs_.resize(std::max(attn_probs_.size(), tasks));
    for (size_t task = 0; task < tasks; ++task) attn_probs_[task].resize(key_spans_[task].size());
  }
  const float scale = c.attn_scale;
  // The entries of a gather's list g that its chunk ci covers: a range of entries, or for a union
  // those in the chunk's range of positions.
  const auto chunk_entries = [&](const Gather& gather, size_t g, size_t ci) {
    const std::span<const uint32_t> list = key_spans_[gather.task + g];
    if (!gather.is_union)
      return std::pair{std::min(ci * chunk, list.size()), std::min((ci + 1) * chunk, list.size())};
    const size_t from = gather.union_begin + ci * chunk;
    const auto lo = std::ranges::lower_bound(list, from), hi = std::lower_bound(lo, list.end(), from + chunk);
    return std::pair{static_cast<size_t>(lo - list.begin()), static_cast<size_t>(hi - list.begin())};
  };
  // The union of a gather's lists over chunk ci's positions, in a per-thread buffer: each position
  // any head chose, with bit g set for head g.
  struct UnionRows {
    std::span<const uint32_t> keys;
    const uint8_t* masks;
  };
  const auto union_rows = [&](const Gather& gather, size_t ci) {
    thread_local std::vector<uint8_t> heads_buffer, masks_buffer;
    thread_local std::vector<uint32_t> keys_buffer;
    const size_t begin = gather.union_begin + ci * chunk;
    const size_t n_pos = std::min<size_t>(begin + chunk, gather.union_end) - begin;
    heads_buffer.assign(n_pos, 0);
    keys_buffer.resize(n_pos);
    masks_buffer.resize(n_pos);
    // Through pointers: a thread_local is looked up again at every access.
    uint8_t* heads = heads_buffer.data();
    uint8_t* masks = masks_buffer.data();
    uint32_t* keys = keys_buffer.data();
    for (size_t g = 0; g < gather.n_q; ++g) {
      const std::span<const uint32_t> list = key_spans_[gather.task + g];
      const auto [from, to] = chunk_entries(gather, g, ci);
      const auto bit = static_cast<uint8_t>(1u << g);
      for (size_t e = from; e < to; ++e) heads[list[e] - begin] |= bit;
    }
    size_t n = 0;
    for (size_t j = 0; j < n_pos; ++j) {  // branch-free: a position's heads are a coin toss
      keys[n] = static_cast<uint32_t>(begin + j);
      masks[n] = heads[j];
      n += heads[j] != 0;
    }
    return UnionRows{std::span<const uint32_t>(keys, n), masks};
  };
  pool_.parallel_for(
      n_gathers * n_chunks,
      [&](size_t b, size_t e, int) {
        for (size_t at = b; at < e; ++at) {
          const size_t task = balanced(at / n_chunks, n_gathers) * n_chunks + at % n_chunks;
          const Gather& gather = gathers_[task / n_chunks];
          const size_t ci = task % n_chunks, i = gather.task / n_heads, h = gather.task % n_heads;
          const size_t kvh = h / group, n_q = gather.n_q, start = ci * chunk;
          const std::span<const uint32_t> list = key_spans_[gather.task];
          float* m = &parts.m[task * group];
          float* l = &parts.l[task * group];
          std::span<const uint32_t> keys;
          const uint8_t* masks = nullptr;
          if (gather.is_union) {  // the chunk's positions of the group's lists
            if (gather.union_begin + start < gather.union_end) {
              const UnionRows u = union_rows(gather, ci);
              keys = u.keys, masks = u.masks;
            }
          } else if (start < list.size()) {
            keys = list.subspan(start, std::min(chunk, list.size() - start));
          }
          if (keys.empty()) {
            std::fill(l, l + n_q, 0.0f);
            continue;
          }
          const float* q = &q_rows[i * d + h * hd];
          float* acc = &parts.acc[task * group * hd];
          thread_local std::vector<float> numerators;  // [g][key]: exp(score - m[g])
          if (watched) numerators.resize(n_q * keys.size());
          float* p = watched ? numerators.data() : nullptr;
          if (cache.quantized()) {
            attend_coded(cache, layer, kvh, q, n_q, keys, scale, m, l, acc, p);
          } else {
            thread_local std::vector<uint32_t> slot_buffer;
            const std::span<const uint32_t> slots = cache.slots(layer, keys, slot_buffer);
            k.attn_gather(q, n_q, cache.key_head(layer, kvh), cache.value_head(layer, kvh), hd, slots.data(),
                          masks, slots.size(), hd, scale, m, l, acc, p);
          }
          for (size_t g = 0; watched && g < n_q; ++g) {
            // To the head's own list from the chunk's first entry: every row, or a union's rows
            // with bit g, in order.
            float* own = attn_probs_[gather.task + g].data() + chunk_entries(gather, g, ci).first;
            const float* from = &numerators[g * keys.size()];
            if (!masks) {
              std::copy_n(from, keys.size(), own);
              continue;
            }
            for (size_t j = 0; j < keys.size(); ++j)
              if (masks[j] >> g & 1) *own++ = from[j];
          }
        }
      },
      plan.min_items);
  pool_.parallel_for(
      n_gathers,
      [&](size_t b, size_t e, int) {
        for (size_t u = b; u < e; ++u) {
          const Gather& gather = gathers_[u];
          const size_t i = gather.task / n_heads, h = gather.task % n_heads;
          for (size_t g = 0; g < gather.n_q; ++g) {
            const size_t first = u * n_chunks * group + g;
            const MergedSoftmax merged = merge_parts(parts.m, parts.l, parts.acc, first, group, n_chunks, hd,
                                                     &out[i * d + (h + g) * hd]);
            if (!watched || merged.denom <= 0.0f) continue;
            std::vector<float>& p = attn_probs_[gather.task + g];
            for (size_t ci = 0; ci < n_chunks; ++ci) {  // chunk numerators -> probabilities
              const auto [begin, end] = chunk_entries(gather, g, ci);
              if (begin >= end) continue;
              const float f = std::exp(parts.m[first + ci * group] - merged.max) / merged.denom;
              for (size_t j = begin; j < end; ++j) p[j] *= f;
            }
          }
        }
      },
      kMinCombinePairs);
  if (!policies) return;
  const std::span<const std::vector<float>> probs =
      watched ? std::span<const std::vector<float>>(attn_probs_).first(tasks)
              : std::span<const std::vector<float>>();
  policies->after_attention({layer, pos0, n_heads, &rows, key_spans_, probs});
}

}  // namespace ts
