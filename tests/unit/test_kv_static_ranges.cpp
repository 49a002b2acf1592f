// Static (calibrated) KV ranges: the cache codes every token against the layer's calibrated range
// (error within half a step inside it, clamped outside, nothing stored per token, KIVI keys coded at
// once), attention over those codes matches the decoded rows, the calibration covers every K/V
// it saw and leaves out exactly the tokens each rule preserves, the profile round-trips, and
// kvquant:ranges=static,profile=FILE runs the model with them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "core/thread_pool.h"
#include "exact_queries.h"
#include "kernels/quant_types.h"
#include "policies/builtin_policies.h"
#include "policies/kvquant/outlier_profile.h"
#include "policies/kvquant/sink_preservation.h"
#include "policies/kvquant/static_ranges.h"
#include "policies/layer_profile.h"
#include "runtime/kv_attention.h"
#include "runtime/transformer.h"
#include "stories_fixture.h"

namespace ts {
namespace {

constexpr size_t kLayers = 2, kCtx = 64, kHead = 8, kDim = 16;  // 2 KV heads of 8

std::vector<float> half_rows(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n * kDim);
  for (float& x : v) x = fp16_to_float(float_to_fp16(d(rng)));
  return v;
}

// Ranges [-1.5, 2] on every channel but channel 3 ([-4, 0.5]).
std::shared_ptr<const KvStaticRanges> fixed_ranges() {
  auto r = std::make_shared<KvStaticRanges>();
  r->n_layers = kLayers;
  r->kv_dim = kDim;
  for (auto* v : {&r->key_lo, &r->value_lo}) v->assign(kLayers * kDim, -1.5f);
  for (auto* v : {&r->key_hi, &r->value_hi}) v->assign(kLayers * kDim, 2.0f);
  for (size_t l = 0; l < kLayers; ++l) {
    r->key_lo[l * kDim + 3] = r->value_lo[l * kDim + 3] = -4.0f;
    r->key_hi[l * kDim + 3] = r->value_hi[l * kDim + 3] = 0.5f;
  }
  return r;
}

void fill(KvCache& c, const std::vector<float>& k, const std::vector<float>& v, size_t n, size_t full) {
  c.begin_batch(0, n);
  for (size_t l = 0; l < kLayers; ++l) {
    for (size_t p = 0; p < n; ++p)
      c.store(l, p, &k[p * kDim], &v[p * kDim], p == full ? KvStorage::Full : KvStorage::Default);
    c.commit(l, 0, n);
    c.hold_all(l, 0, n);
  }
  c.set_size(n);
}

// A decoded value: x clamped to the range, within half a step.
void within(float decoded, float x, std::pair<float, float> range, unsigned bits) {
  const float step = (range.second - range.first) / float(code_max(bits));
  ASSERT_LE(std::abs(decoded - std::clamp(x, range.first, range.second)), step * 0.5f + 1e-5f)
      << x << " " << bits;
}

TEST(KvStaticRanges, CodesAgainstTheCalibratedRangeAndClampOutside) {
  const size_t n = 21, full = 4;
  const auto k = half_rows(n, 1, 1.5f), v = half_rows(n, 2, 1.5f);
  for (unsigned bits : {8u, 4u, 2u})
    for (bool kivi : {false, true}) {
      const KvFormat f{.bits = bits,
                       .group = 8,
                       .channel_keys = kivi,
                       .quantized_prefill = true,
                       .ranges = fixed_ranges()};
      KvCache c(kLayers, kCtx, kDim, kHead, f);
      fill(c, k, v, n, full);
      EXPECT_EQ(c.bytes_per_token(), kLayers * (2 * code_bytes(bits, kDim) + 1)) << f.describe();
      std::vector<float> kr(kDim), vr(kDim);
      for (size_t p = 0; p < n; ++p) {
        c.read_key(1, p, kr.data());
        c.read_value(1, p, vr.data());
        for (size_t ch = 0; ch < kDim; ++ch) {
          if (p == full) {
            ASSERT_EQ(kr[ch], k[p * kDim + ch]);
            ASSERT_EQ(vr[ch], v[p * kDim + ch]);
            continue;
          }
          // Per channel (KIVI keys): the channel's own range; per-token groups of 8: the extremes of
          // their channels (channel 3's group spans [-4, 2]). KIVI keys are coded at once too.
          const std::pair<float, float> group = ch < 8 ? std::pair{-4.0f, 2.0f} : std::pair{-1.5f, 2.0f};
          const std::pair<float, float> own = ch == 3 ? std::pair{-4.0f, 0.5f} : std::pair{-1.5f, 2.0f};
          within(kr[ch], k[p * kDim + ch], kivi ? own : group, bits);
          within(vr[ch], v[p * kDim + ch], group, bits);
        }
      }
      // Attention over the codes equals attention over the decoded rows.
      const auto q = exactly_rounded_queries(half_rows(2, 3), kHead);
      std::vector<uint32_t> pos = {0, 3, 4, 9, 15, 20};
      float m[2], l[2], acc[2 * kHead];
      attend_coded(c, 1, 1, q.data(), 2, pos, 0.5f, m, l, acc);
      for (size_t g = 0; g < 2; ++g) {
        std::vector<float> s(pos.size()), out(kHead, 0.0f);
        for (size_t j = 0; j < pos.size(); ++j) {
          c.read_key(1, pos[j], kr.data());
          s[j] = 0;
          for (size_t x = 0; x < kHead; ++x) s[j] += 0.5f * q[g * kHead + x] * kr[kHead + x];
        }
        const float mx = *std::max_element(s.begin(), s.end());
        float sum = 0;
        for (size_t j = 0; j < pos.size(); ++j) {
          const float p = std::exp(s[j] - mx);
          sum += p;
          c.read_value(1, pos[j], vr.data());
          for (size_t x = 0; x < kHead; ++x) out[x] += p * vr[kHead + x];
        }
        EXPECT_NEAR(l[g] * std::exp(m[g] - mx), sum, 1e-4f * sum);
        for (size_t x = 0; x < kHead; ++x)
          ASSERT_NEAR(acc[g * kHead + x] * std::exp(m[g] - mx), out[x], 1e-4f * sum) << f.describe();
      }
    }
  auto bad = std::make_shared<KvStaticRanges>(*fixed_ranges());
  bad->kv_dim = 8;
  EXPECT_THROW(KvCache(kLayers, kCtx, kDim, kHead, KvFormat{.bits = 4, .group = 8, .ranges = bad}), Error);
}

// Every K/V row written, by (layer, position), from a dense run of the same windows.
class KvRecorder final : public Policy {
 public:
  KvRecorder() : Policy({"kv_rows", {}}) {}
  std::vector<HookClaim> claims() const override { return {{Hook::ObserveKv, {}}}; }
  void observe_kv(const KvRows& kv) override {
    for (size_t i = 0; i < kv.rows->size(); ++i)
      rows.push_back({kv.layer,
                      kv.pos0 + (*kv.rows)[i],
                      {kv.keys + i * kv.kv_dim, kv.keys + (i + 1) * kv.kv_dim},
                      {kv.values + i * kv.kv_dim, kv.values + (i + 1) * kv.kv_dim}});
  }
  struct Row {
    size_t layer, pos;
    std::vector<float> k, v;
  };
  std::vector<Row> rows;
};

TEST(KvStaticRanges, CalibrationCoversWhatItSawAndLeavesOutThePreserved) {
  ThreadPool pool(2);
  const std::vector<std::vector<int32_t>> windows = {random_tokens(40, 1), random_tokens(33, 2)};
  const uint32_t layer = 1, channel = 7;
  const size_t kept = 3;
  const auto sets = calibrate_kv_ranges(stories(), pool, windows, layer, channel, kept);
  ASSERT_EQ(sets.size(), 3u);
  // The same windows with a recorder and KVSink, to know each window's sinks.
  std::vector<std::pair<std::vector<KvRecorder::Row>, std::vector<uint32_t>>> seen;
  for (const auto& w : windows) {
    Transformer tf(stories(), pool, 64);
    PolicyOptions o(PolicySpec::parse("kvsink:k=3,layer=1,channel=7"), KvSink::options());
    auto sink = std::make_unique<KvSink>(o);
    auto rec = std::make_unique<KvRecorder>();
    KvSink* s = sink.get();
    KvRecorder* r = rec.get();
    std::vector<std::unique_ptr<Policy>> ps;
    ps.push_back(std::move(sink));
    ps.push_back(std::move(rec));
    tf.set_policies(std::make_unique<PolicyStack>(std::move(ps), stories()));
    tf.forward(w, false);
    ASSERT_EQ(s->sinks().size(), kept);
    seen.emplace_back(std::move(r->rows), s->sinks());
  }
  const size_t kv = sets[0].ranges.kv_dim, n_layers = stories().config().n_layers;
  for (const CalibratedRanges& set : sets) {
    EXPECT_EQ(set.preserved, set.excluding == RangeExclusion::None ? 0u : kept);
    std::vector<float> klo(n_layers * kv, INFINITY), khi(n_layers * kv, -INFINITY), vlo = klo, vhi = khi;
    for (const auto& [rows, sinks] : seen)
      for (const auto& r : rows) {
        const bool kvsink = r.layer > layer && std::ranges::find(sinks, r.pos) != sinks.end();
        if (set.excluding == RangeExclusion::Pfn ? r.pos < kept
                                                 : set.excluding == RangeExclusion::KvSink && kvsink)
          continue;
        for (size_t c = 0; c < kv; ++c) {
          const size_t i = r.layer * kv + c;
          klo[i] = std::min(klo[i], r.k[c]), khi[i] = std::max(khi[i], r.k[c]);
          vlo[i] = std::min(vlo[i], r.v[c]), vhi[i] = std::max(vhi[i], r.v[c]);
        }
      }
    EXPECT_EQ(set.ranges.key_lo, klo) << exclusion_name(set.excluding);
    EXPECT_EQ(set.ranges.key_hi, khi) << exclusion_name(set.excluding);
    EXPECT_EQ(set.ranges.value_lo, vlo) << exclusion_name(set.excluding);
    EXPECT_EQ(set.ranges.value_hi, vhi) << exclusion_name(set.excluding);
  }
  // Leaving tokens out never widens a range.
  for (size_t i = 0; i < sets[0].ranges.key_lo.size(); ++i) {
    ASSERT_GE(sets[2].ranges.key_lo[i], sets[0].ranges.key_lo[i]);
    ASSERT_LE(sets[1].ranges.value_hi[i], sets[0].ranges.value_hi[i]);
  }
}

// Malformed files are one-line errors naming the file (a non-string "format" escaped as a JSON type
// error before fuzz_policy_files found it).
TEST(KvStaticRanges, MalformedProfilesAreOneLineErrors) {
  const std::string head = R"({"format":"tokensieve-kvsink-profile",)";
  for (const std::string& text :
       {std::string("{"), std::string(R"({"format":7})"), std::string("[1]"),
        head + R"("model":0,"emergence_layer":1,"channel":2})",
        head + R"("emergence_layer":"1","channel":2})", head + R"("channel":2})",
        // numbers a cast would turn into undefined behaviour
        head + R"("emergence_layer":1,"channel":-1})", head + R"("emergence_layer":1.5,"channel":2})",
        head + R"("emergence_layer":1,"channel":2,"channels":[2,-3]})",
        head + R"("emergence_layer":1,"channel":2,"ranges":[{"excluding":"none","preserved":-1,)"
               R"("key_min":[[0]],"key_max":[[0]],"value_min":[[0]],"value_max":[[0]]}]})",
        head + R"("emergence_layer":1,"channel":2,"ranges":[{"excluding":"none","preserved":0,)"
               R"("key_min":[[1e300]],"key_max":[[0]],"value_min":[[0]],"value_max":[[0]]}]})"}) {
    const std::string path = testing::TempDir() + "/bad_kvsink_profile.json";
    {
      std::ofstream f(path);
      f << text;
    }
    try {
      read_outlier_profile(path);
      ADD_FAILURE() << text;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(path, 0), 0u) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

TEST(KvStaticRanges, ProfileRoundTripsAndDrivesKvquant) {
  ThreadPool pool(2);
  const std::vector<std::vector<int32_t>> windows = {random_tokens(48, 3), random_tokens(48, 4)};
  OutlierProfile p;
  p.model_name = stories().config().name;
  p.model_hash = model_fingerprint(stories());
  p.emergence_layer = 1;
  p.channel = 7;
  p.ranges = calibrate_kv_ranges(stories(), pool, windows, 1, 7, 2);
  p.calibration_json = R"({"windows": 2})";
  const std::string path = testing::TempDir() + "/kvsink_ranges.json";
  write_outlier_profile(path, p);
  const OutlierProfile back = read_outlier_profile(path);
  ASSERT_EQ(back.ranges.size(), 3u);
  EXPECT_EQ(back.calibration_json, R"({"windows":2})");
  for (size_t s = 0; s < 3; ++s) {  // stored rounded outwards: still covers the calibration
    const KvStaticRanges &a = p.ranges[s].ranges, &b = back.ranges[s].ranges;
    EXPECT_EQ(back.ranges[s].excluding, p.ranges[s].excluding);
    ASSERT_EQ(b.key_lo.size(), a.key_lo.size());
    for (size_t i = 0; i < a.key_lo.size(); ++i) {
      ASSERT_LE(b.key_lo[i], a.key_lo[i]);
      ASSERT_GE(b.key_hi[i], a.key_hi[i]);
      ASSERT_LE(b.value_lo[i], a.value_lo[i]);
      ASSERT_GE(b.value_hi[i], a.value_hi[i]);
      ASSERT_NEAR(b.key_hi[i], a.key_hi[i], 2e-3 * std::abs(a.key_hi[i]));
    }
  }

  // The model under static 8-bit ranges stays near the dense model; 2-bit static moves further.
  const auto t = random_tokens(60, 5);
  const auto logits = [&](std::vector<std::string> specs) {
    Transformer tf(stories(), pool, 64);
    tf.set_policies(make_policy_stack(specs, stories()));
    const auto out = tf.forward(t, false);
    if (!specs.empty()) {
      EXPECT_TRUE(tf.cache().static_ranges());
    }
    return std::vector<float>(out.begin(), out.end());
  };
  const auto dense = logits({});
  const auto diff = [&](const std::vector<float>& x) {
    double d = 0;
    for (size_t i = 0; i < x.size(); ++i) d = std::max(d, double(std::abs(x[i] - dense[i])));
    return d;
  };
  const double d8 = diff(logits({"kvquant:bits=8,group=16,prefill=quantized,ranges=static,profile=" + path}));
  const double d2 =
      diff(logits({"kvquant:bits=2,group=16,mode=kivi,prefill=quantized,ranges=static,excluding=pfn,"
                   "profile=" +
                       path,
                   "pfn:n=2"}));
  EXPECT_LT(d8, 0.5);
  EXPECT_GT(d2, 2 * d8);

  EXPECT_THROW(make_policy_stack(std::vector<std::string>{"kvquant:bits=4,ranges=static"}, stories()), Error);
  EXPECT_THROW(make_policy_stack(std::vector<std::string>{"kvquant:bits=4,profile=" + path}, stories()),
               Error);
  EXPECT_NO_THROW(make_policy_stack(std::vector<std::string>{"kvsink:k=5,profile=" + path}, stories()));

  // Both policies that read the profile refuse one calibrated on another model, in one line that
  // names both models.
  p.model_name = "Other Model";
  p.model_hash = "fnv1a64:0123456789abcdef";
  write_outlier_profile(path, p);
  for (const std::string& spec :
       {"kvquant:bits=4,ranges=static,profile=" + path, "kvsink:k=5,profile=" + path}) {
    try {
      make_policy_stack(std::vector<std::string>{spec}, stories());
      ADD_FAILURE() << spec << " accepted a profile of another model";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("calibrated on another model (Other Model, fnv1a64:0123456789abcdef)"),
                std::string::npos)
          << msg;
      EXPECT_NE(msg.find(model_fingerprint(stories())), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
  p.model_hash.clear();  // profiles without a model hash are refused too
  write_outlier_profile(path, p);
  EXPECT_THROW(make_policy_stack(std::vector<std::string>{"kvsink:k=5,profile=" + path}, stories()), Error);
}

}  // namespace
}  // namespace ts
