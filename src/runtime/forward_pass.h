#pragma once
// The forward pass of a Llama-family decoder over one batch of sequences:
//   x -> RMSNorm -> Q,K,V -> RoPE -> KV cache -> attention -> O -> +x -> RMSNorm -> SwiGLU FFN -> +x
// The rows of every sequence in the batch go through each matrix product together, so a step
// reads the weights once however many sequences it advances (continuous batching: prompt chunks
// and decode tokens mixed). RoPE, the KV cache, attention and the token-sparsification policies
// (policy.h) work per sequence and see that sequence's rows only; a matrix product's row does
// not depend on the other rows, so each sequence's results are bit for bit those of running it
// alone. Without policies it is dense.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"
#include "runtime/row_set.h"
#include "runtime/sequence.h"

namespace ts {

// One sequence's part of a batch: `tokens` are appended at positions seq->n_past().., and the
// logits of rows first_logit_row.. are computed (tokens.size(): none).
struct SequenceStep {
  Sequence* seq = nullptr;
  std::span<const int32_t> tokens;
  size_t first_logit_row = 0;
};

class ForwardPass {
 public:
  ForwardPass(const Model& model, ThreadPool& pool, MatmulPrecision precision = MatmulPrecision::Fast);

  // Logits of step `step`'s rows first_row.. (n_vocab floats per row); valid during the call.
  using LogitsSink = std::function<void(size_t step, size_t first_row, std::span<const float> logits)>;
  // Runs the steps (each sequence at most once) as one batch and hands the logits asked for to
  // on_logits in slices, in step order. Throws ts::Error before running anything on a bad step
  // (no tokens, an id outside the vocabulary, context overflow). Each sequence's policies evict
  // at its Sequence::end_batch() afterwards.
  void run(std::span<const SequenceStep> steps, const LogitsSink& on_logits);

  // run()'s checks of its steps, for a caller that cuts one call into several runs.
  void check(std::span<const SequenceStep> steps) const;

  const Model& model() const { return model_; }
  ThreadPool& pool() const { return pool_; }

 private:
  // A sequence's rows in the current batch: x_ rows row0.., positions pos0.., and at the current
  // layer which of them run each step and where its compact rows sit in the shared products.
  struct Slice {
    Sequence* seq;
    size_t row0, n_tok, pos0, first_logit_row;
    LayerRows rows;
    std::vector<KvStorage> kv_storage;  // per rows.kv row, as the policies chose
    size_t kv0, q0, attn0, ffn0;        // first row in k_/v_, q_, O's input (in q_), the FFN's products
    bool skips, skip_reads_q, kv_decided;
    bool fused_qkv;  // Q of the kv rows projected with K and V
    bool late_q;     // Q of the attending rows projected after the policies decided on K/V
    KvCache& cache() const { return seq->cache(); }
    PolicyStack* policies() const { return seq->policies(); }
  };

  void output_logits(const LogitsSink& on_logits);
  void plan_layer(Slice& s, size_t layer);
  void attention_block(size_t layer);
  void project_kv(size_t layer);
  void project_late_queries(size_t layer);
  void ffn_block(size_t layer);
  // The compact rows of one step (`set`) of every slice (or those with `take` set), side by side
  // from row 0 (src itself when one slice runs every row, else a copy in xg_), and how many.
  // first: the member receiving each slice's offset.
  struct Gathered {
    const float* rows;
    size_t n;
  };
  Gathered gather(const float* src, size_t width, RowSet LayerRows::*set, size_t Slice::*first,
                  bool Slice::*take = nullptr);
  // pass_rows_: the batch rows of `set` of every slice (or those with `take`) in compact order,
  // each slice's offset written to `first`.
  void compact_rows(RowSet LayerRows::*set, size_t Slice::*first, bool Slice::*take = nullptr);
  // Passes of at most kPassRows of pass_rows_: RMSNorm(weight) of each pass's rows of x_ into xn_'s
  // first rows, then fn(first compact row, n).
  void normed_passes(const std::vector<float>& weight, const std::function<void(size_t, size_t)>& fn);
  // x_ row pass_rows_[first + i] += xn_ row i, for i < n.
  void add_pass(size_t first, size_t n);
  // The inputs of a projection: the attention-input norms of `set`'s rows (gather's arguments),
  // handed to fn(first compact row, n, rows): at once from xn_ when it holds every row's, else
  // pass by pass.
  void for_attention_inputs(size_t layer, RowSet LayerRows::*set, size_t Slice::*first, bool Slice::*take,
                            const std::function<void(size_t, size_t, const float*)>& fn);
  void rms_norm_rows(const float* x, const std::vector<float>& weight, float* y, size_t n_rows);
  enum class Heads { Queries, Keys };
  void position_row(float* x, size_t batch_row, size_t layer, Heads heads) const;
  void position_rows(float* x, const Slice& s, const RowSet& rows, size_t layer, Heads heads);
  void rope_and_store(Slice& s, size_t layer, bool rotate_k, bool rotate_q);
  // Partial results of attention work items, and attend()'s query tiles: first row of each tile
  // (and rows.attn.size() last), each row's tile. One per pool thread: slices attend side by side.
  struct AttentionParts {
    std::vector<float> m, l, acc;  // per item: max score, softmax denominator, value sums
    std::vector<size_t> tile_first_row, row_tile;
    bool tiled = false;  // tiles of the rows in one aligned run of positions, else one row each
    std::vector<std::span<const uint32_t>> tile_keys;  // the keys each query tile attends together
  };
  // inline_only: every work item on the calling thread (the caller shares slices among threads).
  void attend(Slice& s, size_t layer, AttentionParts& parts, bool inline_only);
  void attend_listed(Slice& s, size_t layer);
  void attend_listed_rows(Slice& s, size_t layer, const RowSet& rows, size_t first);
  std::span<const uint32_t> attended_keys(const KvCache& cache, size_t layer, size_t pos) const;
  // How attend and attend_listed cut key streams into work items (see plan_key_chunks).
  struct KeyChunks {
    size_t chunk, n_chunks, min_items;
  };
  void attend_tiles(Slice& s, size_t layer, AttentionParts& parts, const KeyChunks& plan, size_t t0,
                    size_t t1, bool inline_only);
  KeyChunks plan_key_chunks(AttentionParts& parts, size_t streams, size_t n_keys_max, size_t queries = 0,
                            size_t extra_parts = 0, size_t sized_streams = SIZE_MAX);
  LayerInput layer_input(const Slice& s, size_t layer) const;
  void resize_scratch(size_t n_tok);

  // Below this many (KV head x key) rows, a slice's attention runs on one thread: beside other such
  // slices (attention_block), or alone on the calling thread (attend).
  static constexpr size_t kMinSharedAttentionKeys = 1024;

  const Model& model_;
  ThreadPool& pool_;
  MatmulPrecision precision_;
  std::vector<Slice> slices_;

  // Activations of the current batch, row-major [token][feature], the slices' rows side by side.
  // Steps on a token subset use compact rows of q_, k_, v_; xg_ holds gathered inputs, sized when
  // a gather needs it (a whole prompt's call rarely gathers all rows). xn_, gate_ and up_ hold a
  // pass of rows (normed inputs, O's and the FFN's products), or every row's attention-input norms
  // while whole_norms_.
  std::vector<float> x_, xn_, xg_, q_, k_, v_, gate_, up_, logits_;
  bool whole_norms_ = true;          // the current layer keeps every row's attention-input norm in xn_
  std::vector<uint32_t> pass_rows_;  // compact_rows
  std::vector<std::vector<float>> rope_cos_,
      rope_sin_;  // per RoPE of the model: rope_tables() of each batch row
  std::vector<uint32_t> stored_positions_;
  struct LogitRow {
    uint32_t slice, row;  // row of the slice's step
  };
  std::vector<LogitRow> logit_rows_;  // output_logits: the rows asked for, in step order
  // Per pool thread. attend: per (query tile of one pass, KV head, key chunk or the rows' tails,
  // query in tile); attend_listed (parts_[0]): per (gather, key chunk, query head in gather).
  std::vector<AttentionParts> parts_;
  std::vector<Slice*> side_by_side_;  // attention_block: slices small enough to attend on one thread
  // Attention over key lists: per (row, query head) the keys read, the policy's lists, probabilities.
  std::vector<std::span<const uint32_t>> key_spans_;
  std::vector<std::vector<uint32_t>> key_lists_;
  std::vector<std::vector<float>> attn_probs_;
  RowSet listed_rows_;  // attend_listed's chunk of rows
  // One gather of a list: the (row, query head) index of its first head in key_spans_, and how
  // many adjacent query heads of one KV head read it. is_union: the group's lists differ and are
  // read as one masked union, chunked over positions [union_begin, union_end) (the span the lists
  // cover: on a windowed layer only the window), each row once for the heads whose lists hold it.
  struct Gather {
    uint32_t task, n_q;
    bool is_union = false;
    uint32_t union_begin = 0, union_end = 0;
  };
  std::vector<Gather> gathers_;
  size_t scratch_tokens_ = 0;
};

}  // namespace ts
