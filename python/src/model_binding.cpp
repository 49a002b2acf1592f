// tokensieve.Model: loading, tokenizing, and the CLI's reports (info, ppl, eval) on the loaded
// model, returned as the dicts `--json` prints.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>

#include "bindings.h"
#include "cli/reports.h"
#include "core/error.h"
#include "eval/data_file.h"
#include "model/chat_template.h"

namespace ts::python {
namespace {

nb::object to_python(const std::string& json_text) {
  return nb::module_::import_("json").attr("loads")(json_text);
}

nb::object perplexity(const LoadedModel& m, const std::optional<std::string>& text,
                      const std::optional<std::string>& file, const std::optional<std::string>& dataset,
                      const std::vector<std::string>& policies, size_t ctx, const std::string& protocol,
                      size_t stride, size_t chunks, const std::string& data_dir, const std::string& samples) {
  TS_CHECK((text ? 1 : 0) + (file ? 1 : 0) + (dataset ? 1 : 0) == 1, "give one of text, file or dataset");
  cli::PplRequest r;
  r.model = m.options(policies, ctx);
  r.file = text ? "<text>" : file.value_or("");
  r.dataset = dataset.value_or("");
  r.data_dir = data_dir.empty() ? cli::default_data_dir() : data_dir;
  r.protocol = protocol;
  r.stride = stride;
  r.chunks = chunks;
  r.samples_path = samples;
  TS_CHECK(protocol.empty() || protocol == "llamacpp" || protocol == "stride", "protocol '", protocol,
           "': expected llamacpp or stride");
  cli::ppl_protocol(r);
  std::string report;
  {
    nb::gil_scoped_release unlocked;
    const PplCorpus corpus = text   ? PplCorpus{"<text>", *text}
                             : file ? PplCorpus{*file, read_text_file(*file)}
                                    : load_ppl_corpus(r.dataset, r.data_dir);
    report = cli::ppl_report(*m.model, r, corpus, false).dump();
  }
  return to_python(report);
}

nb::object evaluate(const LoadedModel& m, const std::vector<std::string>& tasks,
                    const std::vector<std::string>& policies, size_t limit, std::optional<uint64_t> seed,
                    size_t ctx, const std::string& data_dir, const std::string& samples) {
  cli::EvalRequest r;
  r.model = m.options(policies, ctx);
  r.tasks = tasks;
  r.selection.data_dir = data_dir.empty() ? cli::default_data_dir() : data_dir;
  r.selection.limit = limit;
  r.seed = seed;
  r.samples_path = samples;
  std::string report;
  {
    nb::gil_scoped_release unlocked;
    std::vector<std::unique_ptr<cli::TaskRun>> runs = cli::load_eval_tasks(r);
    report = cli::eval_report(*m.model, r, runs).dump();
  }
  return to_python(report);
}

}  // namespace

void add_model(nb::module_& m) {
  nb::class_<LoadedModel>(m, "Model")
      .def(
          "__init__",
          [](LoadedModel* self, const std::string& path, int threads, bool exact) {
            TS_CHECK(threads >= 0 && threads <= 1024, "threads must be in [0, 1024] (0: every core)");
            std::unique_ptr<Model> model;
            {
              nb::gil_scoped_release unlocked;
              model = Model::load(path);
            }
            new (self) LoadedModel{std::move(model), path, threads, exact};
          },
          nb::arg("path"), nb::arg("threads") = 0, nb::arg("exact") = false)
      .def_ro("path", &LoadedModel::path)
      .def_ro("threads", &LoadedModel::threads)
      .def_ro("exact", &LoadedModel::exact)
      .def(
          "info",
          [](const LoadedModel& lm, const std::vector<std::string>& policies) {
            return to_python(cli::info_report(*lm.model, lm.path, policies).dump());
          },
          nb::arg("policies") = std::vector<std::string>{})
      .def(
          "tokenize",
          [](const LoadedModel& lm, const std::string& text, std::optional<bool> add_bos, bool special) {
            const Tokenizer& tok = lm.model->tokenizer();
            return tok.encode(text, add_bos.value_or(tok.add_bos_default()), special);
          },
          nb::arg("text"), nb::arg("add_bos") = nb::none(), nb::arg("special") = true)
      .def(
          "detokenize",
          [](const LoadedModel& lm, const std::vector<int32_t>& ids, bool special) {
            lm.check_ids(ids);
            return lm.model->tokenizer().decode(ids, special);
          },
          nb::arg("ids"), nb::arg("special") = false)
      .def_prop_ro("n_vocab", [](const LoadedModel& lm) { return lm.model->config().n_vocab; })
      .def_prop_ro("n_layers", [](const LoadedModel& lm) { return lm.model->config().n_layers; })
      .def_prop_ro("n_heads", [](const LoadedModel& lm) { return lm.model->config().n_heads; })
      .def_prop_ro("n_ctx_train", [](const LoadedModel& lm) { return lm.model->config().n_ctx_train; })
      .def("chat_prompt", [](const LoadedModel& lm, const std::string& user) {
        return ChatTemplate::from_gguf(lm.model->gguf()).render({{"user", user}}, true);
      });
  m.def("perplexity", &perplexity, nb::arg("model"), nb::arg("text") = nb::none(),
        nb::arg("file") = nb::none(), nb::arg("dataset") = nb::none(),
        nb::arg("policies") = std::vector<std::string>{}, nb::arg("ctx") = 0, nb::arg("protocol") = "",
        nb::arg("stride") = 0, nb::arg("chunks") = 0, nb::arg("data_dir") = "", nb::arg("samples") = "");
  m.def("evaluate", &evaluate, nb::arg("model"), nb::arg("tasks"),
        nb::arg("policies") = std::vector<std::string>{}, nb::arg("limit") = 0, nb::arg("seed") = nb::none(),
        nb::arg("ctx") = 0, nb::arg("data_dir") = "", nb::arg("samples") = "");
  m.def("task_names", &cli::eval_task_names);
}

}  // namespace ts::python
