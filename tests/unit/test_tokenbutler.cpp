// The TokenButler predictor (paper 001): hand-written backward against finite differences, SIMD
// against the scalar reference, the logit-MSE gradient, the file format, and training that resumes
// from a checkpoint bit for bit. Small shapes and stories260K only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "butler_fixture.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "eval/ppl_datasets.h"
#include "key_recorder.h"
#include "model/model.h"
#include "policies/builtin_policies.h"
#include "policies/tokenbutler/butler_file.h"
#include "policies/tokenbutler/butler_metrics.h"
#include "policies/tokenbutler/butler_training.h"
#include "runtime/policy_stack.h"
#include "runtime/transformer.h"
#include "stories_fixture.h"
#include "test_paths.h"

namespace ts {
namespace {

const Model& stories() {
  static const auto model = Model::load(shared_path("models/stories260K.gguf"));
  return *model;
}

ButlerConfig small_config() {
  ButlerConfig c;
  c.n_embd = 24;
  c.n_reduced = 8;
  c.n_heads = 2;  // head size 4
  c.n_layers = 3;
  c.first_layer = 1;
  c.n_query_heads = 2;
  c.imp_dim = 4;
  c.inter = 6;
  c.rope_base = 100.0f;
  return c;
}

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// A functional of the outputs whose gradient is known: sum(a * q_imp) + sum(b * k_imp).
double probe(const ButlerWeights& w, const SimdOps& k, const std::vector<float>& x, size_t n,
             const std::vector<float>& a, const std::vector<float>& b) {
  ButlerNet net(w, k);
  ButlerCache cache;
  ButlerActs acts;
  net.forward(x.data(), n, cache, acts);
  double s = 0.0;
  for (size_t j = 0; j < a.size(); ++j) s += double(a[j]) * acts.q_imp[j] + double(b[j]) * acts.k_imp[j];
  return s;
}

TEST(TokenButler, BackwardMatchesFiniteDifferences) {
  const ButlerConfig c = small_config();
  ButlerWeights w = ButlerWeights::init(c, 3);
  // Non-trivial LayerNorm and biases, so their gradients are exercised.
  w.for_each([&, seed = 10u](const char*, size_t, size_t cols, std::vector<float>& t) mutable {
    if (cols == 1) t = random_floats(t.size(), seed++, 0.3f), t[0] += 1.0f;
  });
  const size_t n = 7;
  const auto x = random_floats(n * c.n_embd, 1);
  const auto a = random_floats(n * c.n_out(), 2), b = random_floats(n * c.n_out(), 3);
  const SimdOps& k = scalar_ops();
  ButlerNet net(w, k);
  ButlerCache cache;
  ButlerActs acts;
  net.forward(x.data(), n, cache, acts);
  ButlerWeights grad = ButlerWeights::zeros(c);
  std::vector<float> da = a, db = b;
  net.backward(x.data(), cache, acts, da.data(), db.data(), grad);

  std::vector<std::vector<float>*> ws, gs;
  std::vector<std::string> names;
  w.for_each([&](const char* name, size_t, size_t, std::vector<float>& t) {
    ws.push_back(&t);
    names.push_back(name);
  });
  grad.for_each([&](const char*, size_t, size_t, std::vector<float>& t) { gs.push_back(&t); });
  for (size_t t = 0; t < ws.size(); ++t) {
    // Directional derivative along a random direction, central differences.
    const auto dir = random_floats(ws[t]->size(), 100 + static_cast<uint32_t>(t));
    double analytic = 0.0;
    for (size_t j = 0; j < dir.size(); ++j) analytic += double((*gs[t])[j]) * dir[j];
    const float eps = 1e-2f;
    const std::vector<float> saved = *ws[t];
    for (size_t j = 0; j < dir.size(); ++j) (*ws[t])[j] = saved[j] + eps * dir[j];
    const double up = probe(w, k, x, n, a, b);
    for (size_t j = 0; j < dir.size(); ++j) (*ws[t])[j] = saved[j] - eps * dir[j];
    const double down = probe(w, k, x, n, a, b);
    *ws[t] = saved;
    const double numeric = (up - down) / (2.0 * eps);
    EXPECT_NEAR(analytic, numeric, 2e-2 * std::max(1.0, std::fabs(numeric))) << names[t];
  }
}

TEST(TokenButler, SimdMatchesTheScalarReference) {
  const ButlerConfig c = small_config();
  const ButlerWeights w = ButlerWeights::init(c, 4);
  const size_t n = 9;
  const auto x = random_floats(n * c.n_embd, 5);
  ButlerWeights g1 = ButlerWeights::zeros(c), g2 = ButlerWeights::zeros(c);
  std::vector<float> q1, q2;
  // By run, not by table: under TS_SIMD=scalar ops() is the scalar table itself.
  for (const bool reference : {true, false}) {
    ButlerNet net(w, reference ? scalar_ops() : ops());
    ButlerCache cache;
    ButlerActs acts;
    net.forward(x.data(), n, cache, acts);
    auto da = random_floats(n * c.n_out(), 6), db = random_floats(n * c.n_out(), 7);
    net.backward(x.data(), cache, acts, da.data(), db.data(), reference ? g1 : g2);
    (reference ? q1 : q2) = acts.q_imp;
  }
  ASSERT_EQ(q1.size(), q2.size());
  for (size_t j = 0; j < q1.size(); ++j) ASSERT_NEAR(q1[j], q2[j], 1e-4f);
  for (size_t j = 0; j < g1.q_hidden.size(); ++j) ASSERT_NEAR(g1.q_hidden[j], g2.q_hidden[j], 1e-3f);
  for (size_t j = 0; j < g1.w_in.size(); ++j) ASSERT_NEAR(g1.w_in[j], g2.w_in[j], 1e-3f);
}

TEST(TokenButler, IncrementalForwardEqualsTheWholeBatch) {
  const ButlerConfig c = small_config();
  const ButlerWeights w = ButlerWeights::init(c, 8);
  const size_t n = 6;
  const auto x = random_floats(n * c.n_embd, 9);
  ButlerNet net(w, ops());
  ButlerCache whole, steps;
  ButlerActs a, s;
  net.forward(x.data(), n, whole, a);
  for (size_t t = 0; t < n; ++t) {
    net.forward(x.data() + t * c.n_embd, 1, steps, s);
    for (size_t j = 0; j < c.n_out(); ++j) ASSERT_NEAR(s.k_imp[j], a.k_imp[t * c.n_out() + j], 1e-5f);
    for (size_t j = 0; j < c.n_out(); ++j) ASSERT_NEAR(s.q_imp[j], a.q_imp[t * c.n_out() + j], 1e-5f);
  }
}

std::vector<std::vector<int32_t>> stories_chunks(size_t n_chunks, size_t len) {
  std::mt19937 rng(12);
  std::vector<std::vector<int32_t>> chunks(n_chunks, std::vector<int32_t>(len));
  for (auto& c : chunks)
    for (auto& t : c) t = static_cast<int32_t>(3 + rng() % 400);
  return chunks;
}

// Attaches a fresh AttentionCapture to llm (stories260K) as its only policy; the capture.
AttentionCapture& attach_capture(Transformer& llm, uint32_t first_layer) {
  auto capture = std::make_unique<AttentionCapture>(first_layer);
  AttentionCapture& cap = *capture;
  std::vector<std::unique_ptr<Policy>> v;
  v.push_back(std::move(capture));
  llm.set_policies(std::make_unique<PolicyStack>(std::move(v), stories()));
  return cap;
}

TEST(TokenButler, LogitMseGradientMatchesFiniteDifferences) {
  const ButlerConfig c = stories_config();
  ThreadPool pool(1);
  Transformer llm(stories(), pool, 16);
  AttentionCapture& cap = attach_capture(llm, c.first_layer);
  const auto tokens = stories_chunks(1, 12)[0];
  run_with_capture(llm, tokens);
  ButlerWeights w = ButlerWeights::init(c, 13);
  ButlerNet net(w, ops());
  // Every row, and a sample of the rows (the loss of --loss-rows).
  for (const std::vector<uint32_t>& rows :
       {loss_rows(tokens.size(), 0, 0), std::vector<uint32_t>{2, 7, 11}}) {
    const auto loss_at = [&](std::vector<float>* dq, std::vector<float>* dk) {
      ButlerCache cache;
      ButlerActs acts;
      net.forward(cap.input().data(), tokens.size(), cache, acts);
      std::vector<float> q(acts.q_imp.size()), k(acts.k_imp.size());
      const double loss = butler_mse(c, llm, cap, acts, rows, pool, q.data(), k.data());
      if (dq) *dq = q, *dk = k;
      return loss;
    };
    std::vector<float> dq, dk;
    loss_at(&dq, &dk);
    // Through the whole network: the direction of k_out and q_hidden.
    ButlerWeights grad = ButlerWeights::zeros(c);
    {
      ButlerCache cache;
      ButlerActs acts;
      net.forward(cap.input().data(), tokens.size(), cache, acts);
      net.backward(cap.input().data(), cache, acts, dq.data(), dk.data(), grad);
    }
    for (auto [wt, gt] : {std::pair{&w.k_out, &grad.k_out}, std::pair{&w.q_hidden, &grad.q_hidden}}) {
      const auto dir = random_floats(wt->size(), 14);
      double analytic = 0.0;
      for (size_t j = 0; j < dir.size(); ++j) analytic += double((*gt)[j]) * dir[j];
      const std::vector<float> saved = *wt;
      const float eps = 1e-3f;
      for (size_t j = 0; j < dir.size(); ++j) (*wt)[j] = saved[j] + eps * dir[j];
      const double up = loss_at(nullptr, nullptr);
      for (size_t j = 0; j < dir.size(); ++j) (*wt)[j] = saved[j] - eps * dir[j];
      const double down = loss_at(nullptr, nullptr);
      *wt = saved;
      EXPECT_NEAR(analytic, (up - down) / (2 * eps), 2e-2 * std::max(1.0, std::fabs(analytic)))
          << rows.size() << " rows";
    }
  }
}

// The loss over sampled rows is the mean of their causal squared errors, computed here from the full
// logit matrices; and the pool's threads, which take a layer's heads, change no bit of it.
TEST(TokenButler, LogitMseOverSampledRowsAndAnyThreads) {
  const ButlerConfig c = stories_config();
  ThreadPool one(1), three(3);
  Transformer llm(stories(), one, 24);
  AttentionCapture& cap = attach_capture(llm, c.first_layer);
  const auto tokens = stories_chunks(1, 20)[0];
  run_with_capture(llm, tokens);
  ButlerWeights w = ButlerWeights::init(c, 17);
  ButlerCache cache;
  ButlerActs acts;
  ButlerNet(w, ops()).forward(cap.input().data(), tokens.size(), cache, acts);
  const std::vector<uint32_t> rows = loss_rows(tokens.size(), 6, 5);
  ASSERT_EQ(rows.size(), 6u);
  ASSERT_TRUE(std::is_sorted(rows.begin(), rows.end()));
  EXPECT_NE(rows, loss_rows(tokens.size(), 6, 6));  // another seed, another sample
  double sum = 0.0, entries = 0.0;
  for_each_logit_pair(c, llm, cap, acts, [&](const LogitPair& p) {
    for (uint32_t i : rows)
      for (size_t j = 0; j <= i; ++j) {
        const double diff = double(p.predicted[i * p.n + j]) - p.target[i * p.n + j];
        sum += diff * diff;
        entries += 1.0;
      }
  });
  std::vector<float> q1(acts.q_imp.size()), k1(acts.k_imp.size()), q3(q1.size()), k3(k1.size());
  const double loss1 = butler_mse(c, llm, cap, acts, rows, one, q1.data(), k1.data());
  const double loss3 = butler_mse(c, llm, cap, acts, rows, three, q3.data(), k3.data());
  EXPECT_NEAR(loss1, sum / entries, 1e-5 * sum / entries);
  EXPECT_EQ(loss1, loss3);
  EXPECT_EQ(q1, q3);
  EXPECT_EQ(k1, k3);
  // Only the sampled rows' queries get a gradient.
  const size_t o = c.n_out();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const bool sampled = std::binary_search(rows.begin(), rows.end(), uint32_t(i));
    const bool any = std::any_of(&q1[i * o], &q1[(i + 1) * o], [](float g) { return g != 0.0f; });
    EXPECT_EQ(any, sampled) << "row " << i;
  }
}

TEST(TokenButler, FileRoundTripsInF32AndF16) {
  const ButlerConfig c = small_config();
  const std::string path = testing::TempDir() + "/butler_roundtrip.safetensors";
  ButlerFile f{ButlerWeights::init(c, 15), {{"note", "x"}}, {{"extra.t", {1.0f, 2.0f}}}};
  save_butler(path, f, false);
  ButlerFile g = load_butler(path);
  EXPECT_EQ(g.weights.k_out, f.weights.k_out);
  EXPECT_EQ(g.weights.config.inter, c.inter);
  EXPECT_EQ(g.metadata.at("note"), "x");
  EXPECT_EQ(g.extra.at("extra.t"), (std::vector<float>{1.0f, 2.0f}));
  save_butler(path, f, true);
  g = load_butler(path);
  for (size_t j = 0; j < f.weights.q_out.size(); ++j)
    ASSERT_NEAR(g.weights.q_out[j], f.weights.q_out[j], 1e-3f);
  std::filesystem::resize_file(path, 100);
  EXPECT_THROW(load_butler(path), Error);
  EXPECT_THROW(load_butler(path + ".missing"), Error);
}

// A predictor file whose header is edited: every malformed field is a one-line ts::Error naming the
// file (found by fuzz/fuzz_policy_files.cpp: JSON type errors and std::stoul escaped as other exceptions).
TEST(TokenButler, MalformedFilesAreOneLineErrors) {
  const std::string path = testing::TempDir() + "/butler_malformed.safetensors";
  save_butler(path, ButlerFile{ButlerWeights::init(small_config(), 15), {}, {}}, false);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  const auto with = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json h = header;
    edit(h);
    const std::string text = h.dump();
    const uint64_t size = text.size();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&size), 8);
    out << text << bytes.substr(8 + n);
  };
  const std::vector<std::function<void(nlohmann::json&)>> edits = {
      [](nlohmann::json& h) { h["attn.in"]["dtype"] = 7; },
      [](nlohmann::json& h) { h["attn.in"]["data_offsets"] = "x"; },
      [](nlohmann::json& h) {
        h["attn.in"]["data_offsets"] = {-1.5, 1e30};
      },  // a cast: undefined behaviour
      [](nlohmann::json& h) { h["attn.in"] = 3; },
      [](nlohmann::json& h) { h["__metadata__"]["n_embd"] = "12x"; },
      [](nlohmann::json& h) { h["__metadata__"]["n_embd"] = "99999999999"; },
      [](nlohmann::json& h) { h["__metadata__"]["inter"] = "1048576"; },  // more weights than the file holds
      [](nlohmann::json& h) { h["__metadata__"]["rope_base"] = "nan"; },
      [](nlohmann::json& h) { h["__metadata__"]["note"] = 5; },
      [](nlohmann::json& h) { h["__metadata__"] = 5; },
  };
  for (size_t i = 0; i < edits.size(); ++i) {
    with(edits[i]);
    try {
      load_butler(path);
      ADD_FAILURE() << "edit " << i << " loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << i << ": " << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << i;
    }
  }
}

TEST(TokenButler, TrainingLowersTheLossAndResumesBitForBit) {
  const ButlerConfig c = stories_config();
  ButlerTrainOptions o;
  o.steps = 14;
  o.lr = 1e-2;
  ThreadPool pool(1);
  {
    ButlerTrainer one_chunk(stories(), pool, c, o, stories_chunks(1, 24));
    const double first = one_chunk.step();
    double last = first;
    for (size_t s = 1; s < o.steps; ++s) last = one_chunk.step();
    EXPECT_LT(last, 0.9 * first);
  }
  o.steps = 6;
  const auto chunks = stories_chunks(3, 24);
  ButlerTrainer straight(stories(), pool, c, o, chunks);
  std::vector<double> losses;
  for (size_t s = 0; s < o.steps; ++s) losses.push_back(straight.step());

  const std::string ckpt = testing::TempDir() + "/butler_resume.ckpt";
  {
    ButlerTrainer first(stories(), pool, c, o, chunks);
    for (size_t s = 0; s < 3; ++s) first.step();
    first.save_checkpoint(ckpt, {});
  }
  ButlerTrainer resumed(stories(), pool, c, o, chunks);
  resumed.resume(ckpt);
  EXPECT_EQ(resumed.steps_done(), 3u);
  for (size_t s = 3; s < o.steps; ++s) EXPECT_EQ(resumed.step(), losses[s]);
  EXPECT_EQ(resumed.weights().q_out, straight.weights().q_out);
  EXPECT_EQ(resumed.weights().w_in, straight.weights().w_in);

  // Fine-tuning starts from a predictor's weights (its loss, not a fresh one's) with a fresh
  // optimizer; a predictor of another shape is refused.
  const std::string trained = testing::TempDir() + "/butler_trained.safetensors";
  save_butler(trained, {straight.weights(), {}, {}}, false);
  ButlerTrainer tuned(stories(), pool, c, o, chunks);
  tuned.start_from(trained);
  EXPECT_EQ(tuned.weights().q_out, straight.weights().q_out);
  EXPECT_EQ(tuned.steps_done(), 0u);
  EXPECT_LT(tuned.step(), losses[0]);
  ButlerConfig wider = c;
  wider.inter = c.inter * 2;
  ButlerTrainer other(stories(), pool, wider, o, chunks);
  EXPECT_THROW(other.start_from(trained), Error);
}

std::vector<float> run_policy(const std::vector<std::string>& specs, std::span<const int32_t> tokens,
                              size_t step) {
  ThreadPool pool(2);
  Transformer tf(stories(), pool, 96);
  if (!specs.empty()) tf.set_policies(make_policy_stack(specs, stories()));
  std::vector<float> out;
  for (size_t i = 0; i < tokens.size(); i += step) {
    const auto l = tf.forward(tokens.subspan(i, std::min(step, tokens.size() - i)), true);
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

TEST(TokenButler, PolicyIsDenseAtKeepOneAndDecodesAsItPrefills) {
  const std::string path = stories_predictor();
  const auto tokens = stories_chunks(1, 64)[0];
  expect_same_attention(run_policy({"tokenbutler:keep=1,predictor=" + path}, tokens, 64),
                        run_policy({}, tokens, 64), "tokenbutler:keep=1");
  for (const std::string opts : {",keep=0.4", ",keep=0.3,recent=8", ",keep=0.4,shared=1", ",keep=0.4,keys=i8",
                                 ",keep=0.4,shared=1,keys=i8"}) {
    const std::string spec = "tokenbutler:predictor=" + path + opts;
    const auto whole = run_policy({spec}, tokens, 64), steps = run_policy({spec}, tokens, 1);
    const auto dense = run_policy({}, tokens, 64);
    expect_same_attention(whole, steps, spec);
    EXPECT_NE(whole, dense) << spec;  // sparse attention changes the result
  }
  EXPECT_THROW(make_policy_stack(std::vector<std::string>{"tokenbutler:keep=0.5"}, stories()), Error);
  EXPECT_THROW(
      make_policy_stack(std::vector<std::string>{"tokenbutler:keep=0.5,predictor=/nonexistent"}, stories()),
      Error);
}

// TokenButler's key choice over a quantized cache (KVSink-style storage + TokenButler decode):
// prefill and token-by-token decode agree (prefill=quantized reads a batch's own K/V coded), and
// the training targets q.k read the keys as the cache holds them.
TEST(TokenButler, ComposesWithQuantizedCache) {
  const std::string path = stories_predictor();
  const auto tokens = stories_chunks(1, 64)[0];
  const std::string kv = "kvquant:bits=4,group=16,prefill=quantized";
  const std::vector<std::string> specs = {kv, "pfn:n=2", "tokenbutler:keep=0.4,predictor=" + path};
  const auto whole = run_policy(specs, tokens, 64), steps = run_policy(specs, tokens, 1);
  ASSERT_EQ(whole.size(), steps.size());
  for (size_t i = 0; i < whole.size(); ++i) ASSERT_NEAR(whole[i], steps[i], 1e-3f);
  EXPECT_NE(whole, run_policy({kv, "pfn:n=2"}, tokens, 64));

  const ButlerConfig c = stories_config();
  ThreadPool pool(1);
  Transformer llm(stories(), pool, 16);
  auto capture = std::make_unique<AttentionCapture>(c.first_layer);
  AttentionCapture& cap = *capture;
  std::vector<std::unique_ptr<Policy>> v;
  v.push_back(builtin_policies().create(kv));
  v.push_back(std::move(capture));
  llm.set_policies(std::make_unique<PolicyStack>(std::move(v), stories()));
  ASSERT_TRUE(llm.cache().quantized());
  const auto twelve = stories_chunks(1, 12)[0];
  run_with_capture(llm, twelve);
  ButlerWeights w = ButlerWeights::init(c, 13);
  ButlerNet net(w, ops());
  ButlerCache bc;
  ButlerActs acts;
  net.forward(cap.input().data(), twelve.size(), bc, acts);
  const size_t D = stories().config().head_dim, H = stories().config().n_heads;
  const size_t group = H / stories().config().n_kv_heads;
  std::vector<float> key(llm.cache().kv_dim());
  size_t checked = 0;
  for_each_logit_pair(c, llm, cap, acts, [&](const LogitPair& p) {
    for (size_t i = 0; i < p.n; ++i)
      for (size_t j = 0; j <= i; ++j) {
        llm.cache().read_key(p.layer, j, key.data());
        float s = 0;
        for (size_t x = 0; x < D; ++x)
          s += cap.queries(p.layer)[i * H * D + p.head * D + x] * key[(p.head / group) * D + x];
        ASSERT_NEAR(p.target[i * p.n + j], s / std::sqrt(float(D)), 1e-4f * (1 + std::abs(s)));
        ++checked;
      }
  });
  EXPECT_GT(checked, 0u);
}

// shared=1: every query head of a KV head attends to the same keys, as many as one head's budget.
TEST(TokenButler, SharedSelectionServesTheWholeGroup) {
  const ModelConfig& m = stories().config();
  const size_t group = m.n_heads / m.n_kv_heads;
  ASSERT_GT(group, 1u);  // the fixture model has grouped-query attention
  const auto tokens = stories_chunks(1, 64)[0];
  const auto recorded = [&](const std::string& opts) {
    ThreadPool pool(2);
    Transformer tf(stories(), pool, 96);
    std::vector<std::unique_ptr<Policy>> v;
    v.push_back(builtin_policies().create("tokenbutler:keep=0.4,predictor=" + stories_predictor() + opts));
    auto rec = std::make_unique<KeyRecorder>();
    KeyRecorder* keys = rec.get();
    v.push_back(std::move(rec));
    tf.set_policies(std::make_unique<PolicyStack>(std::move(v), stories()));
    tf.forward(tokens, false);
    return keys->keys;
  };
  const auto shared = recorded(",shared=1"), own = recorded("");
  size_t groups_differing = 0;
  for (const auto& [where, keys] : shared) {
    const auto [layer, pos, head] = where;
    if (layer == 0) continue;
    const size_t first = head - head % group, budget = (4 * (pos + 1) + 9) / 10;  // ceil(0.4 (pos + 1))
    EXPECT_EQ(keys, shared.at({layer, pos, first}));
    EXPECT_GE(keys.size(), budget);
    EXPECT_LE(keys.size(), budget + 4);  // the sinks may add up to 4
    if (head == first && own.at({layer, pos, first}) != own.at({layer, pos, first + 1})) ++groups_differing;
  }
  EXPECT_GT(groups_differing, 0u);  // per-head selection (the default) does differ within a group
}

// A decode step's few lists are scored by prepare_keys in chunks of positions across the pool
// (fused); on one thread, or for a prefill batch's many lists, select_keys scores its own list
// whole. Both choose the same keys at every layer, position and head (the predictor's input, the
// embeddings, does not depend on the threads), with and without holes in the candidates.
TEST(TokenButler, ScoringAcrossThePoolChoosesTheSameKeys) {
  const auto tokens = stories_chunks(1, 80)[0];
  for (const std::string opts : {"", ",shared=1", ",keys=i8", ",shared=1,keys=i8,recent=3"}) {
    const auto recorded = [&](int threads, const std::string& first) {
      ThreadPool pool(threads);
      Transformer tf(stories(), pool, 96);
      std::vector<std::unique_ptr<Policy>> v;
      if (!first.empty()) v.push_back(builtin_policies().create(first));
      v.push_back(builtin_policies().create("tokenbutler:keep=0.4,predictor=" + stories_predictor() + opts));
      auto rec = std::make_unique<KeyRecorder>();
      KeyRecorder* keys = rec.get();
      v.push_back(std::move(rec));
      tf.set_policies(std::make_unique<PolicyStack>(std::move(v), stories()));
      tf.forward(std::span(tokens).first(40), false);  // prefill: many lists, each scored whole
      for (size_t i = 40; i < tokens.size(); ++i) tf.forward(std::span(tokens).subspan(i, 1), false);
      return keys->keys;
    };
    for (const std::string first : {"", "tokenfilter:ratio=0.3,select=random"}) {  // holes, seeded
      const auto one = recorded(1, first), three = recorded(3, first);
      ASSERT_EQ(one.size(), three.size()) << opts << " " << first;
      size_t decoded = 0;
      for (const auto& [where, keys] : one) {
        EXPECT_EQ(three.at(where), keys) << opts << " " << first;
        decoded += std::get<1>(where) >= 40 && std::get<0>(where) > 0;
      }
      EXPECT_GT(decoded, 0u);
    }
  }
}

// The committed SmolLM2 predictor loads and reproduces the recall recorded next to it (the model
// file is git-ignored: skipped where it is absent).
TEST(TokenButler, CommittedPredictorReproducesItsRecordedRecall) {
  namespace fs = std::filesystem;
  const fs::path model_path = fs::path(source_path("models/SmolLM2-135M-Instruct.Q4_1.gguf"));
  const fs::path predictor = fs::path(source_path("predictors/smollm2-135m-instruct.butler.safetensors"));
  if (!fs::exists(model_path)) GTEST_SKIP() << "SmolLM2 model file not present";
  std::ifstream in(fs::path(source_path("predictors/smollm2-135m-instruct.butler.json")));
  ASSERT_TRUE(in.good());
  const nlohmann::json record = nlohmann::json::parse(in)["recall_check"];
  const auto model = Model::load(model_path.string());
  const ButlerFile file = load_butler(predictor.string());
  const size_t ctx = record["ctx"].get<size_t>();
  const std::vector<int32_t> tokens =
      model->tokenizer().encode(load_ppl_corpus("wikitext2", shared_path("data")).text, false, false);
  ThreadPool pool(2);
  RecallMeter meter(*model, pool, file.weights, ctx);
  meter.add(std::span(tokens).first(ctx));
  const RecallReport r = meter.report();
  for (size_t q = 0; q < r.percents.size(); ++q)
    EXPECT_NEAR(r.recall[q], record["recall"][std::to_string(int(r.percents[q]))].get<double>(), 2e-3) << q;
  EXPECT_NEAR(r.top50_accuracy, record["top50_accuracy"].get<double>(), 2e-3);
}

}  // namespace
}  // namespace ts
