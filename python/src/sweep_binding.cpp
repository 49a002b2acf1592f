// The pieces of `tokensieve sweep` a distributed sweep (tokensieve.sweep, on Ray) drives: the
// grid's cells and their cache files, one shard of a cell run on a loaded model, the shards merged
// into the cell's file, and the table. Outputs cross as JSON text, so nothing is re-rounded.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "cli/sweep_cells.h"

namespace ts::python {
namespace {

nb::list sweep_plan(const std::string& spec_path) {
  const SweepSpec spec = cli::read_sweep_spec(spec_path);
  nb::list cells;
  for (const SweepCell& cell : sweep_cells(spec)) {
    const std::vector<std::string> command = cell_command(spec, cell);
    nb::dict d;
    d["key"] = cell_key(command);
    d["command"] = command;
    d["policy"] = spec.policies[cell.policy].label;
    d["setting"] = spec.settings[cell.setting].label;
    d["task"] = cell.task;
    const cli::CellRequest request = cli::parse_cell_command(command);
    d["model"] = cli::cell_model_path(request);
    const cli::CellInputs inputs = cli::cell_inputs(request);
    d["files"] = inputs.files;
    d["data_dir"] = inputs.data_dir;
    cells.append(d);
  }
  return cells;
}

std::string run_cell_shard(const LoadedModel& m, const std::vector<std::string>& command, size_t index,
                           size_t count, int threads, const std::string& samples_path) {
  const cli::CellRequest request = cli::parse_cell_command(command);
  TS_CHECK(cli::cell_model_path(request) == m.path, "the cell's model is ", cli::cell_model_path(request),
           ", not ", m.path);
  TS_CHECK(count >= 1 && index < count, "shard ", index, " of ", count, ": expected 0 <= index < count");
  TS_CHECK(threads >= 0 && threads <= 1024, "threads must be in [0, 1024] (0: the command's)");
  nb::gil_scoped_release unlocked;
  return cli::run_cell_shard(*m.model, request, Shard{index, count}, threads, samples_path).dump();
}

// Merges the shards into the cell's samples file and writes its result file; returns the output.
std::string finish_cell(const std::string& out_dir, const std::vector<std::string>& command,
                        const std::vector<std::string>& outputs,
                        const std::vector<std::string>& samples_paths, double seconds) {
  std::vector<nlohmann::json> parsed;
  for (const std::string& o : outputs) parsed.push_back(nlohmann::json::parse(o));
  const cli::CellFiles files = cli::cell_files(out_dir, command);
  nb::gil_scoped_release unlocked;
  const nlohmann::json output =
      cli::merge_cell_shards(cli::parse_cell_command(command), parsed, samples_paths, files.samples);
  cli::write_cell(files.result, command, {output, seconds});
  return output.dump();
}

}  // namespace

void add_sweep(nb::module_& m) {
  m.def("sweep_plan", &sweep_plan, nb::arg("spec_path"));
  m.def(
      "cell_cached",
      [](const std::string& out_dir, const std::vector<std::string>& command) {
        return cli::cached_cell(cli::cell_files(out_dir, command).result, command).has_value();
      },
      nb::arg("out_dir"), nb::arg("command"));
  m.def("run_cell_shard", &run_cell_shard, nb::arg("model"), nb::arg("command"), nb::arg("index"),
        nb::arg("count"), nb::arg("threads"), nb::arg("samples_path"));
  m.def("finish_cell", &finish_cell, nb::arg("out_dir"), nb::arg("command"), nb::arg("outputs"),
        nb::arg("samples_paths"), nb::arg("seconds"));
  m.def(
      "write_sweep_table",
      [](const std::string& spec_path, const std::string& out_dir) {
        return cli::write_sweep_table(cli::read_sweep_spec(spec_path), out_dir);
      },
      nb::arg("spec_path"), nb::arg("out_dir"));
}

}  // namespace ts::python
