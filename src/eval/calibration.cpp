#include "eval/calibration.h"

#include <filesystem>

#include "core/error.h"
#include "eval/data_file.h"
#include "eval/perplexity.h"
#include "policies/builtin_policies.h"

namespace ts {

CalibrationSlice wikitext2_calibration_slice(const Model& model, const std::string& data_dir, size_t windows,
                                             size_t ctx) {
  TS_CHECK(windows > 0 && ctx >= 2, "calibration needs at least one window of at least 2 tokens");
  CalibrationSlice s;
  const std::string train = data_dir + "/wikitext2/wiki.train.raw";
  s.train_split = std::filesystem::exists(train);
  s.path = s.train_split ? train : data_dir + "/wikitext2/wiki.test.raw";
  const Tokenizer& tok = model.tokenizer();
  std::vector<int32_t> tokens = tok.encode(read_text_file(s.path), false, /*parse_special=*/false);
  s.file_tokens = tokens.size();
  s.ctx = ctx;
  s.windows = windows;
  const size_t n = windows * ctx;
  TS_CHECK(n <= tokens.size(), s.path, ": ", tokens.size(), " tokens, fewer than the ", windows, " x ", ctx,
           " calibration tokens");
  s.offset = s.train_split ? 0 : tokens.size() - n;
  s.tokens.assign(tokens.begin() + static_cast<std::ptrdiff_t>(s.offset),
                  tokens.begin() + static_cast<std::ptrdiff_t>(s.offset + n));
  return s;
}

double calibration_loss(Transformer& tf, const CalibrationSlice& slice,
                        std::span<const std::string> policy_specs) {
  tf.truncate(0);
  tf.set_policies(make_policy_stack(policy_specs, tf.model()));
  const PerplexityResult r =
      perplexity_strided(tf, slice.tokens, slice.ctx, slice.ctx, 0,
                         [](size_t, const NllAccumulator&, std::span<const double>) {});
  tf.truncate(0);
  tf.set_policies(nullptr);
  return r.acc.nll / double(r.acc.count);
}

}  // namespace ts
