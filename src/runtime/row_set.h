#pragma once
// Which rows of a batch a step of a layer runs on. Dense layers use every row without listing
// 0..n-1; a policy that selects tokens gives an ascending list, and the step then works on a
// compact batch (row i of the compact batch is batch row rows[i]).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/row_gather.h"

namespace ts {

class RowSet {
 public:
  void set_all(size_t n) {
    all_ = true;
    n_ = n;
    list_.clear();
  }
  // Any ascending subset of 0..n-1, also every row: selection results stay lists so that the
  // gather/scatter path is the one measured and tested.
  void set_list(std::span<const uint32_t> rows) {
    all_ = false;
    list_.assign(rows.begin(), rows.end());
    n_ = list_.size();
  }

  bool is_all() const { return all_; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  uint32_t operator[](size_t i) const { return all_ ? static_cast<uint32_t>(i) : list_[i]; }
  // Where batch row t (a member) sits in the compact batch.
  size_t index_of(uint32_t t) const {
    return all_ ? t : static_cast<size_t>(std::lower_bound(list_.begin(), list_.end(), t) - list_.begin());
  }
  bool operator==(const RowSet& o) const { return all_ == o.all_ && n_ == o.n_ && list_ == o.list_; }

  // The compact rows of `src` (rows of `width` floats): src itself for every row, else a copy in buf.
  const float* gather(const float* src, size_t width, std::vector<float>& buf) const {
    if (all_) return src;
    buf.resize(std::max(buf.size(), n_ * width));
    gather_rows(src, list_, width, buf.data());
    return buf.data();
  }
  // The compact rows of `src` copied to dst.
  void copy_to(const float* src, size_t width, float* dst) const {
    if (all_) return static_cast<void>(std::copy_n(src, n_ * width, dst));
    gather_rows(src, list_, width, dst);
  }

 private:
  bool all_ = true;
  size_t n_ = 0;
  std::vector<uint32_t> list_;
};

// The three row sets of one layer. Dense: every row everywhere. A policy's choice leaves ffn the
// tokens that run the layer, attn those of them that also run Q/attention/O, and kv the tokens
// computing K/V (every token, or only the running ones). All empty: the layer is skipped.
struct LayerRows {
  RowSet kv, attn, ffn;

  void set_all(size_t n) {
    kv.set_all(n);
    attn.set_all(n);
    ffn.set_all(n);
  }
  bool idle() const { return kv.empty() && attn.empty() && ffn.empty(); }
};

}  // namespace ts
