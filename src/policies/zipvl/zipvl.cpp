#include "policies/zipvl/zipvl.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>
#include <utility>

#include "core/error.h"
#include "model/model.h"
#include "policies/zipvl/probe_attention.h"

namespace ts {

PolicyOptionList ZipVL::options(Budget budget) {
  const PolicyOptionList ratio =
      budget == Budget::Tau
          ? PolicyOptionList{number_option("tau", 0, 1, "0.975",
                                           "the attention the kept tokens hold, per layer")}
          : PolicyOptionList{
                number_option("keep", 0, 1, "", "the kept fraction in every layer from `after` on"),
                integer_option("after", 0, 1u << 16, "2", "the first layer that keeps fewer")};
  return ratio + PolicyOptionList{
                     text_option("probes", "128", "probe queries estimating attention (>= 2), or all"),
                     choice_option("score", {"normalized", "sum"}, "a token's attention score"),
                     integer_option("seed", 0, UINT64_MAX, "0", "the probes' seed"),
                     integer_option("keep_last", 0, 1, "0", "1: the last prompt token always kept"),
                     choice_option("prefill", {"sparse", "dense"}, "the prompt's attention sparse or dense"),
                     integer_option("mixed", 0, 1, "0", "1: the others stay in the cache at low precision"),
                     integer_option("high", 2, 16, "4", "mixed: the kept tokens' width (16, 8 or 4)"),
                     integer_option("low", 2, 8, "2", "mixed: the others' width (8, 4 or 2)"),
                     integer_option("group", 4, 1u << 16, "128", "mixed: values per quantization group")};
}

ZipVL::ZipVL(PolicyOptions& options, Budget budget) : Policy(options.spec()), budget_(budget) {
  if (budget_ == Budget::Tau) {
    tau_ = *options.number("tau");
  } else {
    const std::optional<double> keep = options.number("keep");
    TS_CHECK(keep, "policy ", name(), ": give the kept fraction, keep=R with 0 < R <= 1");
    keep_ = *keep;
    first_layer_ = *options.integer("after");
  }
  TS_CHECK(tau_ > 0.0 && keep_ > 0.0, "policy ", name(), ": tau and keep must be above 0");
  if (const std::optional<std::string> probes = options.text("probes")) {
    const char* end = probes->data() + probes->size();
    const auto [stop, err] = std::from_chars(probes->data(), end, n_probes_);
    TS_CHECK(*probes == "all" || (err == std::errc() && stop == end && n_probes_ >= 2), "policy ", name(),
             ": probes=", *probes, " is not a count of at least 2 or 'all'");
    if (*probes == "all") n_probes_ = 0;
  }
  rank_ = options.choice<TokenRank>("score", {TokenRank::Normalized, TokenRank::Sum});
  seed_ = *options.integer("seed");
  keep_last_ = *options.integer("keep_last") == 1;
  dense_prefill_ = options.choice<bool>("prefill", {false, true});
  mixed_ = *options.integer("mixed") == 1;
  if (!mixed_) return;
  high_bits_ = static_cast<unsigned>(*options.integer("high"));
  low_bits_ = static_cast<unsigned>(*options.integer("low"));
  TS_CHECK((high_bits_ == 16 || valid_code_bits(high_bits_)) && valid_code_bits(low_bits_) &&
               low_bits_ < high_bits_,
           "policy ", name(), ": high must be 16, 8 or 4 and low 8, 4 or 2, below high");
  group_ = *options.integer("group");
  TS_CHECK(group_ % 4 == 0, "policy ", name(), ": group must be a multiple of 4");
}

// Half-precision important tokens are the cache's full-precision rows over a low-bit format;
// otherwise the format is the high width with the low one for KvStorage::Low.
std::optional<KvFormat> ZipVL::kv_format() const {
  if (!mixed_) return std::nullopt;
  KvFormat f;
  f.group = group_;
  f.bits = high_bits_ == 16 ? low_bits_ : high_bits_;
  f.low_bits = high_bits_ == 16 ? 0 : low_bits_;
  return f;
}

void ZipVL::bind(const Model& model) {
  const size_t n_layers = model.config().n_layers;
  TS_CHECK(first_layer_ < n_layers, "policy ", name(), ": after=", first_layer_,
           " leaves no layer (the model has ", n_layers, ")");
  kept_ratios_.assign(n_layers, 1.0);
  to_evict_.assign(n_layers, {});
}

std::vector<HookClaim> ZipVL::claims() const {
  std::vector<uint32_t> layers(kept_ratios_.size() - first_layer_);
  std::iota(layers.begin(), layers.end(), static_cast<uint32_t>(first_layer_));
  if (mixed_) return {{Hook::SkipAttention, layers}, {Hook::KvStorage, {}}};
  if (dense_prefill_) return {{Hook::SkipAttention, layers}, {Hook::Evict, layers}};
  return {{Hook::SkipAttention, layers}};
}

void ZipVL::skip_attention(const LayerInput& in, const KvRows& kv, const RowSet& running,
                           AttentionSkips& out) {
  if (in.pos0 != 0) return;  // decode: new tokens attend and are kept
  TS_CHECK(running.is_all() && kv.rows->is_all(), "policy ", name(), " runs on layers every token runs");
  const size_t n = in.n_tok;
  const ColumnScores scores = probe_attention(kv, probe_rows(n, n_probes_, seed_, in.layer));
  const size_t p =
      budget_ == Budget::Tau
          ? important_count(scores.sum, tau_)
          : std::max<size_t>(1, static_cast<size_t>(std::lround(keep_ * static_cast<double>(n))));
  std::fill(out.skip.begin(), out.skip.end(), 1);
  for (uint32_t t : top_tokens(scores, p, rank_)) out.skip[t] = 0;
  if (keep_last_) out.skip[n - 1] = 0;
  out.cache_skipped_kv = false;
  const auto kept = static_cast<size_t>(std::count(out.skip.begin(), out.skip.end(), 0));
  kept_ratios_[in.layer] = static_cast<double>(kept) / static_cast<double>(n);
  if (mixed_) {  // U is kept at low precision, not dropped
    important_.resize(n);
    for (size_t t = 0; t < n; ++t) important_[t] = !out.skip[t];
    out.cache_skipped_kv = true;
  }
  if (!dense_prefill_) return;
  if (!mixed_) {
    std::vector<uint32_t>& gone = to_evict_[in.layer];
    gone.clear();
    for (size_t t = 0; t < n; ++t)
      if (out.skip[t]) gone.push_back(static_cast<uint32_t>(t));
  }
  std::fill(out.skip.begin(), out.skip.end(), 0);
  out.cache_skipped_kv = true;
}

// Called right after skip_attention on the layers it decides, so important_ is this layer's T.
void ZipVL::choose_kv_storage(const LayerInput& in, const KvRows& kv, std::span<KvStorage> storage) {
  const KvStorage high = high_bits_ == 16 ? KvStorage::Full : KvStorage::Default;
  const KvStorage low = high_bits_ == 16 ? KvStorage::Default : KvStorage::Low;
  const bool scored = in.pos0 == 0 && in.layer >= first_layer_;  // else: decode or a dense layer
  for (size_t i = 0; i < kv.rows->size(); ++i)
    if (storage[i] != KvStorage::Dropped) storage[i] = !scored || important_[(*kv.rows)[i]] ? high : low;
}

void ZipVL::evict(const KvCache&, Evictions& out) {
  for (size_t l = 0; l < to_evict_.size(); ++l)
    if (!to_evict_[l].empty()) out.add(static_cast<uint32_t>(l), std::exchange(to_evict_[l], {}));
}

}  // namespace ts
