#pragma once
// The extension's pieces: a loaded model shared by its sessions, and the functions each source
// file adds to the module.
#include <nanobind/nanobind.h>

#include <memory>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "core/error.h"
#include "model/model.h"

namespace ts::python {

namespace nb = nanobind;

// A GGUF model as Python holds it: read-only after loading, so sessions on several Python threads
// share it. Threads and precision are what every session and report of the model runs with.
struct LoadedModel {
  std::unique_ptr<Model> model;
  std::string path;
  int threads = 0;  // 0: every core
  bool exact = false;

  // The CLI's model options for a request under `policies` with context `ctx` (0: the command's default).
  // Throws ts::Error for an id outside the vocabulary (Python ints reach the engine unchecked otherwise).
  void check_ids(const std::vector<int32_t>& ids) const {
    const int32_t n = model->tokenizer().n_vocab();
    for (const int32_t id : ids) TS_CHECK(id >= 0 && id < n, "token id ", id, " is not in [0, ", n, ")");
  }

  // The CLI's -c range: 1..2^20 (0 here: the command's default).
  cli::ModelOptions options(const std::vector<std::string>& policies, size_t ctx) const {
    TS_CHECK(ctx <= (size_t{1} << 20), "a context of ", ctx, " tokens is above the limit of ",
             size_t{1} << 20);
    return {path, threads, ctx, exact, policies};
  }
};

void add_model(nb::module_& m);     // Model, reports (info, perplexity, evaluate)
void add_session(nb::module_& m);   // Session, generation, logits, log-likelihood, decisions
void add_policies(nb::module_& m);  // the policy registry
void add_sweep(nb::module_& m);     // a sweep's cells, shards and table (for tokensieve.sweep)

}  // namespace ts::python
