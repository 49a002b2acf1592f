// ZipVL (paper 004): the ratio and the selection on attention matrices with known answers, the
// probe estimate against brute force, and the policy on stories260K: everything kept equals dense
// bit for bit, kept tokens attend over kept tokens only, and the ragged cache keeps the right
// positions through decode and truncation; attention streaming the held rows equals attention
// gathering them; the held rows are slot-addressed and take only their own memory.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/quant_types.h"
#include "model/model.h"
#include "policies/builtin_policies.h"
#include "policies/zipvl/important_tokens.h"
#include "policies/zipvl/probe_attention.h"
#include "policies/zipvl/zipvl.h"
#include "runtime/kv_cache.h"
#include "runtime/transformer.h"
#include "stories_fixture.h"

namespace ts {
namespace {

std::vector<float> copy(std::span<const float> s) { return {s.begin(), s.end()}; }

// Column statistics of a full causal attention matrix (rows sum to 1, row i sees columns 0..i).
ColumnScores columns_of(const std::vector<std::vector<double>>& a) {
  const size_t n = a.size();
  ColumnScores s{std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j <= i; ++j) {
      s.sum[j] += a[i][j];
      s.nnz[j] += 1;
    }
  return s;
}

TEST(ZipVLSelection, CountIsTheFewestTokensReachingTau) {
  const std::vector<double> sums{5, 1, 3, 1};  // total 10; sorted 5, 3, 1, 1
  EXPECT_EQ(important_count(sums, 0.5), 1u);
  EXPECT_EQ(important_count(sums, 0.51), 2u);
  EXPECT_EQ(important_count(sums, 0.8), 2u);
  EXPECT_EQ(important_count(sums, 0.85), 3u);
  EXPECT_EQ(important_count(sums, 0.95), 4u);
  EXPECT_EQ(important_count(sums, 1.0), 4u);
  EXPECT_EQ(important_count({}, 0.9), 0u);
}

// A 4-token causal matrix: token 0 is a sink everyone attends to, token 3 gets its own attention.
//   row 0: 1
//   row 1: .9 .1
//   row 2: .8 .1 .1
//   row 3: .4 .0 .0 .6
// Column sums 3.1, .2, .1, .6 (total 4); nnz 4, 3, 2, 1; normalized .775, .067, .05, .6.
TEST(ZipVLSelection, KnownMatrixGivesKnownRatioAndTokens) {
  const std::vector<std::vector<double>> a{{1}, {.9, .1}, {.8, .1, .1}, {.4, 0, 0, .6}};
  const ColumnScores s = columns_of(a);
  EXPECT_EQ(important_count(s.sum, 0.9), 2u);   // 3.1 + .6 = 3.7 >= 3.6
  EXPECT_EQ(important_count(s.sum, 0.95), 3u);  // 3.9 >= 3.8
  EXPECT_EQ(important_count(s.sum, 0.99), 4u);  // 4.0 >= 3.96
  EXPECT_EQ(top_tokens(s, 2, TokenRank::Normalized), (std::vector<uint32_t>{0, 3}));
  EXPECT_EQ(top_tokens(s, 3, TokenRank::Normalized), (std::vector<uint32_t>{0, 1, 3}));
  EXPECT_EQ(top_tokens(s, 4, TokenRank::Normalized), (std::vector<uint32_t>{0, 1, 2, 3}));
}

// Normalization removes the lower-triangle bias: an early token read weakly by many rows has the
// larger sum, a late token read strongly by its few rows the larger normalized score.
TEST(ZipVLSelection, NormalizedAndSumRankDifferently) {
  const size_t n = 8;
  std::vector<std::vector<double>> a(n);
  for (size_t i = 0; i < n; ++i) {
    a[i].assign(i + 1, 0.0);
    a[i][0] = 0.5;  // the sink
    if (i >= 1) a[i][1] = 0.2;
    if (i >= 6) a[i][6] = 0.3;
    double rest = 1.0;
    for (double x : a[i]) rest -= x;
    a[i][i] += rest;  // the remainder on the diagonal
  }
  const ColumnScores s = columns_of(a);
  // Sums: token 0 4.5, token 1 .5 + 6 * .2 = 1.7, token 6 .3 + .3 = .6, tokens 2-5 .3, token 7 0.
  EXPECT_EQ(top_tokens(s, 2, TokenRank::Sum), (std::vector<uint32_t>{0, 1}));
  // Normalized: token 0 4.5 / 8, token 6 .6 / 2 = .3, token 1 1.7 / 7 = .243.
  EXPECT_EQ(top_tokens(s, 2, TokenRank::Normalized), (std::vector<uint32_t>{0, 6}));
  EXPECT_EQ(top_tokens(s, 3, TokenRank::Normalized), (std::vector<uint32_t>{0, 1, 6}));
}

TEST(ZipVLSelection, TiesGoToTheLaterToken) {
  const ColumnScores s{{1, 1, 1}, {1, 1, 1}};
  EXPECT_EQ(top_tokens(s, 1, TokenRank::Normalized), (std::vector<uint32_t>{2}));
}

TEST(ZipVLProbes, RecentAndDistinctRandomRowsFixedBySeedAndLayer) {
  const auto rows = probe_rows(1000, 128, 7, 3);
  ASSERT_EQ(rows.size(), 128u);
  EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
  EXPECT_EQ(std::adjacent_find(rows.begin(), rows.end()), rows.end());  // distinct
  for (size_t i = 0; i < 64; ++i) EXPECT_EQ(rows[64 + i], 936 + i);     // the 64 most recent
  EXPECT_LT(rows[63], 936u);
  EXPECT_EQ(rows, probe_rows(1000, 128, 7, 3));
  EXPECT_NE(rows, probe_rows(1000, 128, 7, 4));
  EXPECT_NE(rows, probe_rows(1000, 128, 8, 3));
  EXPECT_EQ(probe_rows(100, 128, 7, 3).size(), 100u);  // short prompts: every row
  EXPECT_EQ(probe_rows(1000, 0, 7, 3).size(), 1000u);  // probes=all
  EXPECT_EQ(probe_rows(130, 128, 1, 0).size(), 128u);  // the random half fills 0..65 densely enough
}

// The probe estimate against a brute-force double computation: 2 KV heads, 3 query heads each,
// odd head dim and a batch longer than one probe block.
// Over a pool the probe attention runs one work item per (KV head, block of 64 probes), in waves
// of 16 (every row a probe of 1,100: 36 items, 3 waves): bit for bit the sums of one thread, whatever
// the threads and their schedule.
TEST(ZipVLProbes, PooledAttentionIsTheSameBitForBit) {
  const size_t n = 1100, hd = 8, n_kv = 2, n_heads = 4, kv_dim = n_kv * hd;
  std::mt19937 rng(6);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> keys(n * kv_dim), queries(n * n_heads * hd);
  for (float& x : keys) x = g(rng);
  for (float& x : queries) x = 2.0f * g(rng);
  RowSet rows;
  rows.set_all(n);
  KvRows kv{0, 0, &rows, kv_dim, hd, keys.data(), keys.data(), queries.data(), n_heads};
  ThreadPool one(1), three(3), shuffled(2, ThreadPool::ShuffledSchedule{7});
  for (const size_t n_probes : {size_t{0}, size_t{128}}) {
    const auto probes = probe_rows(n, n_probes, 1, 0);
    kv.pool = nullptr;
    const ColumnScores alone = probe_attention(kv, probes);
    for (ThreadPool* pool : {&one, &three, &shuffled}) {
      kv.pool = pool;
      const ColumnScores pooled = probe_attention(kv, probes);
      EXPECT_EQ(pooled.sum, alone.sum) << pool->size() << " threads, " << n_probes << " probes";
      EXPECT_EQ(pooled.nnz, alone.nnz);
    }
  }
}

TEST(ZipVLProbes, AttentionMatchesBruteForce) {
  const size_t n = 150, hd = 9, n_kv = 2, n_heads = 6, group = 3, kv_dim = n_kv * hd;
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> keys(n * kv_dim), values(n * kv_dim), queries(n * n_heads * hd);
  for (float& x : keys) x = g(rng);
  for (float& x : queries) x = 2.0f * g(rng);
  RowSet rows;
  rows.set_all(n);
  const KvRows kv{0, 0, &rows, kv_dim, hd, keys.data(), values.data(), queries.data(), n_heads};
  for (size_t n_probes : {size_t{0}, size_t{40}}) {
    const auto probes = probe_rows(n, n_probes, 1, 0);
    const ColumnScores got = probe_attention(kv, probes);
    std::vector<double> sum(n, 0.0), nnz(n, 0.0);
    for (uint32_t i : probes)
      for (size_t h = 0; h < n_heads; ++h) {
        std::vector<double> s(i + 1);
        double mx = -INFINITY, total = 0;
        for (size_t j = 0; j <= i; ++j) {
          double d = 0;
          for (size_t x = 0; x < hd; ++x)
            d += double{queries[(i * n_heads + h) * hd + x]} * keys[j * kv_dim + (h / group) * hd + x];
          s[j] = d / std::sqrt(double(hd));
          mx = std::max(mx, s[j]);
        }
        for (double& x : s) total += (x = std::exp(x - mx));
        for (size_t j = 0; j <= i; ++j) {
          sum[j] += s[j] / total;
          nnz[j] += 1;
        }
      }
    for (size_t j = 0; j < n; ++j) {
      ASSERT_NEAR(got.sum[j], sum[j], 1e-4 * (1 + sum[j])) << j;
      ASSERT_EQ(got.nnz[j], nnz[j]) << j;
    }
    if (n_probes == 0) {
      EXPECT_EQ(got.nnz[0], double(n * n_heads));  // eq. 8: n - j per head
    }
  }
}

TEST(ZipVLPolicy, OptionsAreChecked) {
  const PolicyRegistry& r = builtin_policies();
  EXPECT_EQ(r.create("zipvl")->name(), "zipvl");
  EXPECT_NO_THROW(r.create("zipvl:tau=0.96,probes=all,score=sum,seed=3"));
  EXPECT_NO_THROW(r.create("fixedratio:keep=0.5,after=2,probes=64"));
  EXPECT_THROW(r.create("zipvl:tau=0"), Error);
  EXPECT_THROW(r.create("zipvl:tau=1.5"), Error);
  EXPECT_THROW(r.create("zipvl:probes=many"), Error);
  EXPECT_THROW(r.create("zipvl:probes=1"), Error);
  EXPECT_THROW(r.create("zipvl:keep=0.5"), Error);
  EXPECT_THROW(r.create("fixedratio"), Error);
  EXPECT_NO_THROW(r.create("zipvl:mixed=1,high=16,low=2,group=32"));
  EXPECT_THROW(r.create("zipvl:mixed=1,high=2,low=2"), Error);
  EXPECT_THROW(r.create("zipvl:mixed=1,high=5"), Error);
  EXPECT_THROW(r.create("zipvl:mixed=1,group=10"), Error);
  EXPECT_THROW(r.create("zipvl:high=4"), Error);  // high/low/group only with mixed=1
  EXPECT_THROW(make_policy_stack(std::vector<std::string>{"fixedratio:keep=0.5,after=5"}, stories()), Error);
}

TEST(ZipVLPolicy, EverythingKeptEqualsDenseBitForBit) {
  const auto tokens = random_tokens(70, 1);
  for (const char* spec : {"zipvl:tau=1", "fixedratio:keep=1,after=0"}) {
    ThreadPool pool(2);
    Transformer dense(stories(), pool, 80), sparse(stories(), pool, 80);
    sparse.set_policies(make_policy_stack(std::vector<std::string>{spec}, stories()));
    const auto prompt = std::span(tokens).first(60);
    EXPECT_EQ(copy(dense.forward(prompt, true)), copy(sparse.forward(prompt, true))) << spec;
    for (size_t i = 60; i < tokens.size(); ++i) {
      const auto step = std::span(tokens).subspan(i, 1);
      ASSERT_EQ(copy(dense.forward(step, false)), copy(sparse.forward(step, false))) << spec << " at " << i;
    }
  }
}

// prefill=dense: the prompt runs dense (logits bit for bit), then each layer evicts the tokens the
// sparse prefill would have dropped, the same sets.
TEST(ZipVLPolicy, DensePrefillAblationOnlyEvicts) {
  const auto tokens = random_tokens(150, 4);
  ThreadPool pool(1);
  Transformer dense(stories(), pool, 160), sparse(stories(), pool, 160), evicting(stories(), pool, 160);
  sparse.set_policies(make_policy_stack(std::vector<std::string>{"zipvl:tau=0.9"}, stories()));
  evicting.set_policies(
      make_policy_stack(std::vector<std::string>{"zipvl:tau=0.9,prefill=dense"}, stories()));
  EXPECT_EQ(copy(dense.forward(tokens, true)), copy(evicting.forward(tokens, true)));
  sparse.forward(tokens, false);
  // Layer 0's input is the same in both runs, so its choice is too.
  const auto a = sparse.cache().held(0, 149), b = evicting.cache().held(0, 149);
  EXPECT_LT(b.size(), 150u);
  EXPECT_EQ(std::vector<uint32_t>(a.begin(), a.end()), std::vector<uint32_t>(b.begin(), b.end()));
}

// Records, per layer of the last batch, the batch rows that attended and each row's keys (a long
// batch's rows come in chunks, each with the batch's pos0).
class AttentionWatcher final : public Policy {
 public:
  AttentionWatcher() : Policy({"watch", {}}) {}
  std::vector<HookClaim> claims() const override { return {{Hook::ObserveAttention, {}}}; }
  void observe_attention(const AttentionRows& a) override {
    rows.resize(std::max(rows.size(), a.layer + 1));
    keys.resize(rows.size());
    batch_pos0.resize(rows.size(), SIZE_MAX);
    if (batch_pos0[a.layer] != a.pos0) {
      batch_pos0[a.layer] = a.pos0;
      rows[a.layer].clear();
      keys[a.layer].clear();
    }
    for (size_t i = 0; i < a.rows->size(); ++i) {
      rows[a.layer].push_back(static_cast<uint32_t>(a.pos0 + (*a.rows)[i]));
      for (size_t h = 0; h < a.n_heads; ++h) {
        const auto k = a.keys_of(i, h);
        keys[a.layer].emplace_back(k.begin(), k.end());
      }
    }
  }
  std::vector<std::vector<uint32_t>> rows;
  std::vector<std::vector<std::vector<uint32_t>>> keys;  // [layer][row * heads + head]
  std::vector<size_t> batch_pos0;
};

// Attention streaming the held rows (attend(): slots 0..j read as one stream) gives the same
// logits as attention gathering the held positions' rows (attend_listed, forced by a policy
// watching the attention, positions turned into slots), in the sparse prefill, after the eviction of the
// dense-prefill ablation, and through decode (up to the order of float sums: expect_same_attention).
TEST(ZipVLPolicy, CompactedAttentionEqualsGatheredAttention) {
  const auto tokens = random_tokens(300, 4);
  for (const char* spec : {"zipvl:tau=0.9,probes=64", "zipvl:tau=0.9,probes=64,prefill=dense"}) {
    ThreadPool pool(2);
    Transformer compact(stories(), pool, 320), gathered(stories(), pool, 320);
    compact.set_policies(make_policy_stack(std::vector<std::string>{spec}, stories()));
    std::vector<std::unique_ptr<Policy>> v;
    v.push_back(builtin_policies().create(spec));
    v.push_back(std::make_unique<AttentionWatcher>());
    gathered.set_policies(std::make_unique<PolicyStack>(std::move(v), stories()));
    const auto prompt = std::span(tokens).first(280);
    expect_same_attention(copy(compact.forward(prompt, true)), copy(gathered.forward(prompt, true)), spec);
    for (size_t l = 0; l < 5; ++l) EXPECT_FALSE(compact.cache().holds_all(l)) << spec << " layer " << l;
    for (size_t i = 280; i < tokens.size(); ++i) {
      const auto step = std::span(tokens).subspan(i, 1);
      expect_same_attention(copy(compact.forward(step, false)), copy(gathered.forward(step, false)),
                            spec + std::string(" at ") + std::to_string(i));
    }
  }
}

// On a layer with holes the j-th held position's row is slot j, and reads by position find it,
// after every change of the held set: a batch holding some of its rows, evictions before and inside
// the rows held, decode appends, and a truncation whose positions are written again with other
// values (no stale rows); keep_held keeps exactly the held positions. The reference is a plain map from
// position to the row written there.
TEST(KvSlots, HeldRowsAreInSlotOrderAfterEveryChange) {
  constexpr size_t kLayers = 2, kCtx = 64, kDim = 12, kHead = 4;
  KvCache cache(kLayers, kCtx, kDim, kHead);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  // written[l][p]: the K and V rows (kDim each, rounded to half) last stored at position p.
  std::vector<std::map<uint32_t, std::vector<uint16_t>>> written(kLayers);
  const auto write = [&](size_t pos0, size_t n, std::span<const uint32_t> stored) {
    std::vector<float> kv(2 * kDim);
    cache.begin_batch(pos0, n);
    for (size_t l = 0; l < kLayers; ++l) {
      cache.hold_only(l, pos0, stored);
      for (uint32_t p : stored) {
        for (float& x : kv) x = u(rng);
        cache.store(l, p, kv.data(), kv.data() + kDim, KvStorage::Default);
        std::vector<uint16_t>& row = written[l][p];
        row.resize(2 * kDim);
        for (size_t c = 0; c < 2 * kDim; ++c) row[c] = float_to_fp16(kv[c]);
      }
      cache.commit(l, pos0, n);
    }
    cache.set_size(pos0 + n);
  };
  const auto forget = [&](size_t l, std::span<const uint32_t> gone) {
    for (uint32_t p : gone) written[l].erase(p);
  };
  const auto expect_slots = [&](const char* when) {
    for (size_t l = 0; l < kLayers; ++l) {
      std::erase_if(written[l], [&](const auto& e) { return e.first >= cache.size(); });
      const auto held = cache.held(l, cache.size() - 1);
      ASSERT_EQ(held.size(), written[l].size()) << when << " layer " << l;
      size_t j = 0;
      std::vector<float> key(kDim), value(kDim);
      for (const auto& [pos, row] : written[l]) {
        ASSERT_EQ(held[j], pos) << when << " layer " << l;
        cache.read_key(l, pos, key.data());
        cache.read_value(l, pos, value.data());
        for (size_t c = 0; c < kDim; ++c) {
          const size_t h = c / kHead, at = j * kHead + c % kHead;
          ASSERT_EQ(cache.key_head(l, h)[at], row[c]) << when << " layer " << l << " slot " << j;
          ASSERT_EQ(cache.value_head(l, h)[at], row[kDim + c]) << when << " layer " << l << " slot " << j;
          ASSERT_EQ(key[c], fp16_to_float(row[c])) << when << " layer " << l << " position " << pos;
          ASSERT_EQ(value[c], fp16_to_float(row[kDim + c])) << when << " layer " << l;
        }
        ++j;
      }
      std::vector<uint32_t> buffer;
      const auto slots = cache.slots(l, held, buffer);
      for (size_t i = 0; i < slots.size(); ++i) ASSERT_EQ(slots[i], i) << when << " layer " << l;
      std::vector<uint32_t> every(cache.size());  // of all positions written, the held ones stay
      std::iota(every.begin(), every.end(), 0u);
      cache.keep_held(l, every);
      ASSERT_EQ(every, std::vector<uint32_t>(held.begin(), held.end())) << when << " layer " << l;
    }
  };
  std::vector<uint32_t> some;
  for (uint32_t p = 0; p < 40; ++p)
    if (p % 3 != 1) some.push_back(p);
  write(0, 40, some);
  expect_slots("prompt with holes");
  const std::vector<uint32_t> early{0, 5}, late{36, 38};
  cache.evict(0, late);
  cache.evict(1, early);
  forget(0, late);
  forget(1, early);
  expect_slots("evicted");
  std::vector<float> nothing(kDim);
  cache.read_key(1, 5, nothing.data());  // evicted: reads as no key at all
  EXPECT_EQ(nothing, std::vector<float>(kDim, 0.0f));
  for (uint32_t p = 40; p < 45; ++p) {
    const uint32_t one[] = {p};
    write(p, 1, one);
    expect_slots("decode");
  }
  cache.set_size(30);
  expect_slots("truncated");
  std::vector<uint32_t> again;
  for (uint32_t p = 30; p < 50; p += 2) again.push_back(p);
  write(30, 20, again);
  expect_slots("written again");
  EXPECT_EQ(cache.held(0, 49).back(), 48u);
}

// A layer that keeps a fraction of its positions takes about that fraction of the memory a dense
// layer takes (4 KiB pages: 2 MiB pages would span a whole KV head's reserve), and an eviction
// gives the freed rows back.
TEST(KvSlots, ResidentMemoryFollowsTheHeldRows) {
  constexpr size_t kLayers = 4, kCtx = 16384, kDim = 192, kHead = 64, kN = 8192;
  const auto fill = [&](KvCache& c, size_t keep_every) {
    std::vector<float> k(kDim, 0.5f), v(kDim, -0.25f);
    std::vector<uint32_t> kept;
    for (uint32_t p = 0; p < kN; p += keep_every) kept.push_back(p);
    c.begin_batch(0, kN);
    for (size_t l = 0; l < kLayers; ++l) {
      c.hold_only(l, 0, kept);
      for (uint32_t p : kept) c.store(l, p, k.data(), v.data(), KvStorage::Default);
      c.commit(l, 0, kN);
    }
    c.set_size(kN);
  };
  KvCache dense(kLayers, kCtx, kDim, kHead), quarter(kLayers, kCtx, kDim, kHead);
  fill(dense, 1);
  fill(quarter, 4);
  const size_t dense_bytes = dense.resident_bytes(), quarter_bytes = quarter.resident_bytes();
  EXPECT_GE(dense_bytes, dense.held_bytes());
  EXPECT_EQ(quarter.held_bytes() * 4, dense.held_bytes());
  // Each KV head's rows end inside a page: one page of slack per head, K and V.
  const size_t slack = kLayers * (kDim / kHead) * 2 * 4096 + (1 << 20);
  EXPECT_LE(quarter_bytes, quarter.held_bytes() + slack) << "dense " << dense_bytes;
  std::vector<uint32_t> gone;
  for (uint32_t p = 0; p < kN / 2; p += 4) gone.push_back(p);
  for (size_t l = 0; l < kLayers; ++l) quarter.evict(l, gone);
  EXPECT_EQ(quarter.held_bytes() * 8, dense.held_bytes());
  EXPECT_LE(quarter.resident_bytes(), quarter.held_bytes() + slack);
}

// Sparse prefill: at each layer exactly the kept tokens attend, each over the kept tokens up to
// its position (every head); decode tokens attend over the kept prompt tokens and the new ones.
TEST(ZipVLPolicy, KeptTokensAttendOverKeptTokensOnly) {
  const auto tokens = random_tokens(300, 2);
  ThreadPool pool(2);
  Transformer tf(stories(), pool, 320);
  auto watcher = std::make_unique<AttentionWatcher>();
  AttentionWatcher& w = *watcher;
  std::vector<std::unique_ptr<Policy>> v;
  v.push_back(builtin_policies().create("zipvl:tau=0.9,probes=64"));
  v.push_back(std::move(watcher));
  tf.set_policies(std::make_unique<PolicyStack>(std::move(v), stories()));
  tf.forward(std::span(tokens).first(290), false);
  const size_t heads = stories().config().n_heads;
  std::vector<std::vector<uint32_t>> kept(5);
  for (size_t l = 0; l < 5; ++l) {
    const auto held = tf.cache().held(l, 289);
    kept[l].assign(held.begin(), held.end());
    EXPECT_LT(kept[l].size(), 290u) << l;
    ASSERT_EQ(w.rows[l], kept[l]) << l;
    for (size_t i = 0; i < kept[l].size(); ++i)
      for (size_t h = 0; h < heads; ++h) {
        const std::vector<uint32_t> want(kept[l].begin(),
                                         kept[l].begin() + static_cast<std::ptrdiff_t>(i) + 1);
        ASSERT_EQ(w.keys[l][i * heads + h], want) << "layer " << l << " row " << i;
      }
  }
  tf.forward(std::span(tokens).subspan(290, 1), false);
  tf.forward(std::span(tokens).subspan(291, 1), false);
  for (size_t l = 0; l < 5; ++l) {
    std::vector<uint32_t> want = kept[l];
    want.push_back(290);
    want.push_back(291);
    EXPECT_EQ(w.rows[l], std::vector<uint32_t>{291});
    for (size_t h = 0; h < heads; ++h) EXPECT_EQ(w.keys[l][h], want) << l;
  }
}

// Each layer holds exactly the tokens the decision log marks cached, at their original positions
// (layer 0's keys equal the dense run's: RoPE at the original position), decode appends every new
// token, and a truncated cache starts over without stale rows.
TEST(ZipVLPolicy, RaggedCacheKeepsPositionsThroughDecodeAndTruncation) {
  const auto tokens = random_tokens(200, 3);
  ThreadPool pool(1);
  Transformer dense(stories(), pool, 256), tf(stories(), pool, 256);
  auto owned = builtin_policies().create("zipvl:tau=0.8");
  const ZipVL& zipvl = dynamic_cast<const ZipVL&>(*owned);
  std::vector<std::unique_ptr<Policy>> v;
  v.push_back(std::move(owned));
  tf.set_policies(std::make_unique<PolicyStack>(std::move(v), stories()));
  DecisionLog log;
  tf.set_decision_log(&log);
  const auto prompt = std::span(tokens).first(180);
  dense.forward(prompt, false);
  tf.forward(prompt, false);
  ASSERT_EQ(log.layers.size(), 5u);
  const size_t kv = tf.cache().kv_dim();
  std::vector<std::vector<uint32_t>> kept(5);
  for (const LayerRecord& r : log.layers) {
    for (uint32_t t = 0; t < 180; ++t) {
      const bool cached = r.flags[t] & kKvCached;
      EXPECT_EQ(cached, bool(r.flags[t] & kRanAttention)) << "layer " << r.layer << " token " << t;
      if (cached) kept[r.layer].push_back(t);
    }
    const auto held = tf.cache().held(r.layer, 179);
    EXPECT_EQ(std::vector<uint32_t>(held.begin(), held.end()), kept[r.layer]) << r.layer;
    EXPECT_DOUBLE_EQ(zipvl.kept_ratios()[r.layer], kept[r.layer].size() / 180.0);
    EXPECT_LT(kept[r.layer].size(), 180u);
  }
  std::vector<float> a(kv), b(kv);
  for (uint32_t p : kept[0]) {
    tf.cache().read_key(0, p, a.data());
    dense.cache().read_key(0, p, b.data());
    ASSERT_EQ(a, b) << p;
  }

  for (size_t i = 180; i < 190; ++i) tf.forward(std::span(tokens).subspan(i, 1), false);
  for (size_t l = 0; l < 5; ++l) {
    std::vector<uint32_t> want = kept[l];
    for (uint32_t p = 180; p < 190; ++p) want.push_back(p);
    const auto held = tf.cache().held(l, 189);
    EXPECT_EQ(std::vector<uint32_t>(held.begin(), held.end()), want) << l;
  }

  // A second sequence after truncation equals a fresh run of it.
  tf.truncate(0);
  Transformer fresh(stories(), pool, 256);
  fresh.set_policies(make_policy_stack(std::vector<std::string>{"zipvl:tau=0.8"}, stories()));
  const auto other = std::span(tokens).subspan(20, 150);
  EXPECT_EQ(copy(tf.forward(other, false)), copy(fresh.forward(other, false)));
  for (size_t i = 0; i < 5; ++i) {
    const auto step = std::span(tokens).subspan(i, 1);
    ASSERT_EQ(copy(tf.forward(step, false)), copy(fresh.forward(step, false))) << i;
  }
}

// mixed=1: nothing is evicted; at each layer the tokens of T (those that ran attention) stay at
// INT4 and the others at INT2, generated tokens at INT4; prefill=dense keeps the same T (layer 0,
// whose input does not depend on the prefill) with every token attending.
TEST(ZipVLPolicy, MixedPrecisionKeepsEveryTokenAtItsWidth) {
  const auto tokens = random_tokens(200, 6);
  ThreadPool pool(1);
  Transformer tf(stories(), pool, 256), dense_prefill(stories(), pool, 256);
  auto owned = builtin_policies().create("zipvl:tau=0.8,mixed=1,group=16");
  const ZipVL& zipvl = dynamic_cast<const ZipVL&>(*owned);
  std::vector<std::unique_ptr<Policy>> v;
  v.push_back(std::move(owned));
  tf.set_policies(std::make_unique<PolicyStack>(std::move(v), stories()));
  dense_prefill.set_policies(
      make_policy_stack(std::vector<std::string>{"zipvl:tau=0.8,mixed=1,group=16,prefill=dense"}, stories()));
  EXPECT_EQ(tf.cache().format().describe(), "int4 per-token group=16 low=int2");
  DecisionLog log;
  tf.set_decision_log(&log);
  const auto prompt = std::span(tokens).first(180);
  tf.forward(prompt, false);
  dense_prefill.forward(prompt, false);
  ASSERT_EQ(log.layers.size(), 5u);
  for (const LayerRecord& r : log.layers) {
    size_t low = 0;
    for (uint32_t t = 0; t < 180; ++t) {
      const bool ran = r.flags[t] & kRanAttention;
      EXPECT_TRUE(r.flags[t] & kKvCached);
      EXPECT_EQ(bool(r.flags[t] & kKvLowPrecision), !ran) << "layer " << r.layer << " token " << t;
      EXPECT_EQ(tf.cache().low_precision(r.layer, t), !ran) << "layer " << r.layer << " token " << t;
      if (r.layer == 0) {
        EXPECT_EQ(dense_prefill.cache().low_precision(0, t), !ran) << t;
      }
      low += !ran;
    }
    EXPECT_EQ(tf.cache().held(r.layer, 179).size(), 180u);  // nothing evicted
    EXPECT_GT(low, 0u);
    EXPECT_DOUBLE_EQ(zipvl.kept_ratios()[r.layer], (180.0 - double(low)) / 180.0);
  }
  for (size_t i = 180; i < 185; ++i) tf.forward(std::span(tokens).subspan(i, 1), false);
  for (size_t l = 0; l < 5; ++l) {
    EXPECT_EQ(tf.cache().held(l, 184).size(), 185u);
    for (size_t p = 180; p < 185; ++p) EXPECT_FALSE(tf.cache().low_precision(l, p)) << l << " " << p;
  }
}

// With every token important the mixed cache is the plain quantized cache of the high width, bit
// for bit in prefill and decode; high=16 is an INT2 cache with every token at half precision
// (kvquant with Preserve-First-N over the whole sequence).
TEST(ZipVLPolicy, MixedWithEveryTokenImportantEqualsPlainCache) {
  const auto tokens = random_tokens(70, 7);
  const auto prompt = std::span(tokens).first(60);
  const std::pair<std::vector<std::string>, std::vector<std::string>> pairs[] = {
      {{"zipvl:tau=1,mixed=1,group=16"}, {"kvquant:bits=4,group=16"}},
      {{"fixedratio:keep=1,after=0,mixed=1,high=8,low=4,group=16"}, {"kvquant:bits=8,group=16"}},
      {{"zipvl:tau=1,mixed=1,high=16"}, {"kvquant:bits=2", "pfn:n=1000"}}};
  for (const auto& [mixed, plain] : pairs) {
    ThreadPool pool(2);
    Transformer a(stories(), pool, 80), b(stories(), pool, 80);
    a.set_policies(make_policy_stack(mixed, stories()));
    b.set_policies(make_policy_stack(plain, stories()));
    EXPECT_EQ(a.cache().format().bits, b.cache().format().bits) << mixed[0];
    EXPECT_EQ(copy(a.forward(prompt, true)), copy(b.forward(prompt, true))) << mixed[0];
    for (size_t i = 60; i < tokens.size(); ++i) {
      const auto step = std::span(tokens).subspan(i, 1);
      ASSERT_EQ(copy(a.forward(step, false)), copy(b.forward(step, false))) << mixed[0] << " at " << i;
    }
    for (size_t l = 0; l < 5; ++l)
      for (size_t p = 0; p < tokens.size(); ++p) {
        ASSERT_FALSE(a.cache().low_precision(l, p));
        ASSERT_EQ(a.cache().full_precision(l, p), b.cache().full_precision(l, p));
      }
  }
}

}  // namespace
}  // namespace ts
