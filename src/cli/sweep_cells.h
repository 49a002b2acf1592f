#pragma once
// The cells of a sweep (OUT/cells/<key>.json and .samples.jsonl, keyed by the cell's command) and
// the pieces a distributed sweep needs beside `tokensieve sweep`'s own loop: a cell's command run
// in this process on a loaded model, one shard of its examples or windows at a time, and the
// shards' results merged into exactly what the whole command prints (python/tokensieve/sweep.py
// runs the shards as Ray tasks). The table is written from the cells by the same code either way.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "cli/reports.h"
#include "eval/sweep.h"

namespace ts::cli {

// A spec file read and completed (labels, default rows), as `sweep --spec` reads it.
SweepSpec read_sweep_spec(const std::string& path);

struct CellFiles {
  std::string result, samples, log;  // OUT/cells/<key>.json, .samples.jsonl, .log
};
CellFiles cell_files(const std::string& out_dir, const std::vector<std::string>& command);

struct CellResult {
  nlohmann::json output;  // what the command printed (--json)
  double seconds = 0;     // its run time (a sharded cell: the shards' summed)
};
// The cached result, when the cell's file exists, is whole and is for this command.
std::optional<CellResult> cached_cell(const std::string& path, const std::vector<std::string>& command);
// Writes the cell's file whole or not at all (renamed into place).
void write_cell(const std::string& path, const std::vector<std::string>& command, const CellResult& result);
void write_file_atomically(const std::string& path, const std::string& text);

// OUT/sweep.csv from the cells' files: every cell must be cached. Returns the CSV's path.
std::string write_sweep_table(const SweepSpec& spec, const std::string& out_dir);

// A cell's command (`eval ...` or `ppl ...`, as cell_command() makes it) parsed with the flags of
// the subcommand. Throws ts::Error with CLI11's message on a bad command.
using CellRequest = std::variant<EvalRequest, PplRequest>;
CellRequest parse_cell_command(const std::vector<std::string>& command);
const std::string& cell_model_path(const CellRequest& request);
// What a cell reads besides its command: the files it names (the model, a perplexity text file,
// the files of policy options such as profile=) and the evaluation data directory it reads
// ("" when it reads none), resolved as the command resolves them here ($TS_DATA_DIR included).
struct CellInputs {
  std::vector<std::string> files;
  std::string data_dir;
};
CellInputs cell_inputs(const CellRequest& request);

// One shard of the cell on `model` (the file the command names), with `threads` (0: the
// command's), its records to samples_path: what `tokensieve <command> --shard I/N` prints.
nlohmann::json run_cell_shard(const Model& model, CellRequest request, const Shard& shard, int threads,
                              const std::string& samples_path);

// The shards' outputs and samples files, in shard order, merged: the whole command's output (its
// metrics recomputed from the concatenated records, in the order the whole run tallies them), the
// concatenated records written to merged_samples_path.
nlohmann::json merge_cell_shards(const CellRequest& request, const std::vector<nlohmann::json>& outputs,
                                 const std::vector<std::string>& samples_paths,
                                 const std::string& merged_samples_path);

}  // namespace ts::cli
