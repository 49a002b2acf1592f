#include "eval/sink_analysis.h"

#include <cmath>

#include "core/error.h"
#include "runtime/policy.h"

namespace ts {
namespace {

// Copies every layer's h̄ into a SinkStates: an observer, so the forward pass stays dense.
class NormedStateRecorder final : public Policy {
 public:
  NormedStateRecorder(SinkStates& out, const std::function<void(size_t)>& on_layer)
      : Policy(PolicySpec{"normed-state-recorder", {}}), out_(out), on_layer_(on_layer) {}
  std::vector<HookClaim> claims() const override { return {{Hook::ObserveLayerInput, {}}}; }
  bool ranks_whole_calls() const override { return true; }  // one batch: every token at once
  void observe_layer_input(const LayerInput& in) override {
    TS_CHECK(in.pos0 == 0 && in.n_tok == out_.n_tok, "the recorder expects the whole text in one batch");
    std::copy_n(in.normed, in.n_tok * in.dim,
                out_.normed.begin() + std::ptrdiff_t(in.layer * in.n_tok * in.dim));
    on_layer_(in.layer);
  }

 private:
  SinkStates& out_;
  const std::function<void(size_t)>& on_layer_;
};

std::string csv_quoted(const std::string& s) {
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

SinkStates record_normed_states(Transformer& tf, std::span<const int32_t> tokens,
                                const std::function<void(size_t)>& on_layer) {
  TS_CHECK(tf.n_past() == 0 && !tf.policies(), "the sink analysis runs a fresh dense transformer");
  const ModelConfig& c = tf.model().config();
  SinkStates s{c.n_layers, tokens.size(), c.n_embd, {}};
  s.normed.resize(s.n_layers * s.n_tok * s.dim);
  std::vector<std::unique_ptr<Policy>> recorder;
  recorder.push_back(std::make_unique<NormedStateRecorder>(s, on_layer));
  tf.set_policies(std::make_unique<PolicyStack>(std::move(recorder), tf.model()));
  tf.forward_logits(tokens, tokens.size(), [](size_t, std::span<const float>) {});
  tf.truncate(0);
  tf.set_policies(nullptr);
  return s;
}

double l2_norm(std::span<const float> a) {
  double aa = 0;
  for (float x : a) aa += double(x) * x;
  return std::sqrt(aa);
}

double cosine(std::span<const float> a, std::span<const float> b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

void write_sink_csv(std::ostream& out, const SinkStates& s, std::span<const std::string> token_texts,
                    std::span<const size_t> positions) {
  TS_CHECK(token_texts.size() == s.n_tok, "one text per token needed");
  out << "stat,position,token,newline,layer,layer2,value\n";
  const auto row = [&](const char* stat, size_t pos, size_t layer, const std::string& layer2, double value) {
    const std::string& text = token_texts[pos];
    out << stat << ',' << pos << ',' << csv_quoted(text) << ',' << (text.find('\n') != std::string::npos)
        << ',' << layer << ',' << layer2 << ',' << value << '\n';
  };
  out.precision(7);
  for (size_t l = 0; l < s.n_layers; ++l)
    for (size_t i = 0; i < s.n_tok; ++i) {
      if (i > 0) row("sink_cos", i, l, "", cosine(s.at(l, 0), s.at(l, i)));
      row("norm", i, l, "", l2_norm(s.at(l, i)));
    }
  for (size_t p : positions) {
    if (p >= s.n_tok) continue;
    for (size_t l1 = 0; l1 < s.n_layers; ++l1)
      for (size_t l2 = 0; l2 < s.n_layers; ++l2)
        row("layer_cos", p, l1, std::to_string(l2), cosine(s.at(l1, p), s.at(l2, p)));
  }
}

}  // namespace ts
