#pragma once
// The calibration data and loss of the layer searches (layer_search.h): WikiText-2 text in
// windows of `ctx` tokens, each fed as one call (OrthoRank ranks a window's tokens together) and
// scored on every token but its first, as SLEB scores its calibration samples.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/transformer.h"

namespace ts {

struct CalibrationSlice {
  std::string path;             // the file the tokens come from
  bool train_split = false;     // wiki.train.raw (else the tail of wiki.test.raw)
  size_t file_tokens = 0;       // tokens of the whole file
  size_t offset = 0;            // first token of the slice in the file's tokens
  size_t ctx = 0, windows = 0;  // the slice is `windows` windows of `ctx` tokens
  std::vector<int32_t> tokens;
};

// The first windows x ctx tokens of <data_dir>/wikitext2/wiki.train.raw when that file exists;
// otherwise the LAST windows x ctx tokens of wiki.test.raw, which evaluations that read the test
// file from its start with a limited window count (ppl --chunks) never reach.
CalibrationSlice wikitext2_calibration_slice(const Model& model, const std::string& data_dir, size_t windows,
                                             size_t ctx);

// Mean negative log-likelihood per scored token of the slice, with the policy specs (none: dense)
// attached to `tf` for the run; afterwards `tf` is empty and has no policies.
double calibration_loss(Transformer& tf, const CalibrationSlice& slice,
                        std::span<const std::string> policy_specs);

}  // namespace ts
