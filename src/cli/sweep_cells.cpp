#include "cli/sweep_cells.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "eval/data_file.h"
#include "eval/perplexity.h"
#include "runtime/policy_spec.h"

namespace ts::cli {
namespace {

namespace fs = std::filesystem;

// The lines of a samples file, each one record.
std::vector<std::string> record_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::istringstream in(read_text_file(path));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(std::move(line));
  return lines;
}

void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + '\n';
  write_file_atomically(path, text);
}

// The shards' policy step counts added up (null when the command ran without policies).
nlohmann::json summed_sparsity(const std::vector<nlohmann::json>& outputs) {
  StepCounts sum;
  bool any = false;
  for (const nlohmann::json& o : outputs) {
    if (!o.contains("sparsity") || o["sparsity"].is_null()) continue;
    const nlohmann::json& s = o["sparsity"];
    any = true;
    sum.token_layers += s.at("token_layers").get<uint64_t>();
    sum.attention += s.at("attention_token_layers").get<uint64_t>();
    sum.ffn += s.at("ffn_token_layers").get<uint64_t>();
    sum.kv_cached += s.at("kv_token_layers").get<uint64_t>();
  }
  return any ? sparsity_json(sum) : nlohmann::json();
}

nlohmann::json merge_eval(EvalRequest r, const std::vector<nlohmann::json>& outputs,
                          const std::vector<std::string>& samples_paths, const std::string& merged_path) {
  std::vector<std::unique_ptr<TaskRun>> runs = load_eval_tasks(r);
  // The whole run writes each task's records in turn; every shard writes its part of each task.
  std::vector<std::vector<std::string>> by_task(runs.size());
  for (const std::string& path : samples_paths) {
    for (std::string& line : record_lines(path)) {
      const nlohmann::ordered_json record = nlohmann::ordered_json::parse(line);
      size_t t = 0;
      while (t < runs.size() && runs[t]->name() != record.at("task").get<std::string>()) ++t;
      TS_CHECK(t < runs.size(), path, ": a record of task '", record.at("task").get<std::string>(),
               "', which the command does not run");
      runs[t]->tally(record);
      by_task[t].push_back(std::move(line));
    }
  }
  std::vector<std::string> lines;
  for (std::vector<std::string>& task_lines : by_task)
    lines.insert(lines.end(), std::make_move_iterator(task_lines.begin()),
                 std::make_move_iterator(task_lines.end()));
  write_lines(merged_path, lines);
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& run : runs) j[run->name()] = run->metrics();
  const nlohmann::json sparsity = summed_sparsity(outputs);
  if (!sparsity.is_null()) j["sparsity"] = sparsity;
  return nlohmann::json::parse(j.dump());  // as the sweep reads the command's printed JSON
}

nlohmann::json merge_ppl(const std::vector<nlohmann::json>& outputs,
                         const std::vector<std::string>& samples_paths, const std::string& merged_path) {
  nlohmann::json j = outputs.front();  // file, protocol, ctx, ...: the same in every shard
  NllAccumulator acc;
  size_t chunks = 0;
  std::vector<std::string> lines;
  for (const std::string& path : samples_paths)
    for (std::string& line : record_lines(path)) {
      // Each window's tokens in order, as the whole run adds them (nll = -log p exactly).
      const nlohmann::json record = nlohmann::json::parse(line);
      for (const nlohmann::json& nll : record.at("nll")) acc.add(-nll.get<double>());
      lines.push_back(std::move(line));
    }
  for (const nlohmann::json& o : outputs) chunks += o.at("chunks").get<size_t>();
  write_lines(merged_path, lines);
  j["ppl"] = acc.ppl();
  j["ppl_stderr"] = acc.ppl_stderr();
  j["tokens_scored"] = acc.count;
  j["chunks"] = chunks;
  j.erase("sparsity");
  const nlohmann::json sparsity = summed_sparsity(outputs);
  if (!sparsity.is_null()) j["sparsity"] = sparsity;
  return j;
}

}  // namespace

SweepSpec read_sweep_spec(const std::string& path) {
  SweepSpec spec = parse_sweep_spec(nlohmann::json::parse(read_text_file(path), nullptr, false), path);
  complete_sweep_spec(spec);
  return spec;
}

CellFiles cell_files(const std::string& out_dir, const std::vector<std::string>& command) {
  const std::string stem = (fs::path(out_dir) / "cells" / cell_key(command)).string();
  return {stem + ".json", stem + ".samples.jsonl", stem + ".log"};
}

std::optional<CellResult> cached_cell(const std::string& path, const std::vector<std::string>& command) {
  if (!fs::exists(path)) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(read_text_file(path));
    if (j.at("command").get<std::vector<std::string>>() != command) return std::nullopt;
    return CellResult{j.at("output"), j.at("seconds").get<double>()};
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // a file cut short by an interruption: run the cell again
  }
}

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    TS_CHECK(f << text && f.flush(), tmp, ": write error");
  }
  fs::rename(tmp, path);  // whole or absent, whenever the sweep is interrupted
}

void write_cell(const std::string& path, const std::vector<std::string>& command, const CellResult& result) {
  write_file_atomically(
      path,
      nlohmann::json{{"command", command}, {"output", result.output}, {"seconds", result.seconds}}.dump(1));
}

std::string write_sweep_table(const SweepSpec& spec, const std::string& out_dir) {
  const std::vector<SweepCell> cells = sweep_cells(spec);
  std::vector<SweepRow> rows;
  std::vector<std::string> samples;  // per row: its samples file, "" when the cell has none
  for (const SweepCell& cell : cells) {
    const std::vector<std::string> command = cell_command(spec, cell);
    const CellFiles files = cell_files(out_dir, command);
    const std::optional<CellResult> result = cached_cell(files.result, command);
    TS_CHECK(result, files.result, ": the cell has not run (", spec.policies[cell.policy].label, " / ",
             cell.task, ")");
    rows.push_back({&cell, cell_metric(cell.task, result->output), result->seconds,
                    result->output.value("sparsity", nlohmann::json()), std::nullopt});
    samples.push_back(fs::exists(files.samples) ? files.samples : "");  // none in cells cached before samples
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::optional<size_t> base = baseline_row(spec, rows[i].cell->policy);
    const auto unpaired = [&](const std::string& why) {  // the row stays unpaired, the table is written
      std::fprintf(stderr, "warning: %s not paired with %s: %s\n",
                   spec.policies[rows[i].cell->policy].label.c_str(), spec.policies[*base].label.c_str(),
                   why.c_str());
    };
    for (size_t j = 0; base && j < rows.size(); ++j) {
      const SweepCell& c = *rows[j].cell;
      if (c.policy != *base || c.setting != rows[i].cell->setting || c.task != rows[i].cell->task) continue;
      if (samples[i].empty() || samples[j].empty()) {
        unpaired(
            "a cell without samples (cached before cells kept them; delete its cells/*.json to run it "
            "again)");
        continue;
      }
      try {
        rows[i].paired = compare_samples(samples[j], samples[i], {}).back();
      } catch (const Error& e) {  // a pair that does not match (other windows)
        unpaired(e.what());
      }
    }
  }
  const std::string csv = (fs::path(out_dir) / "sweep.csv").string();
  write_file_atomically(csv, sweep_csv(spec, rows));
  return csv;
}

CellRequest parse_cell_command(const std::vector<std::string>& command) {
  CLI::App app("a sweep cell's command");
  EvalRequest eval;
  PplRequest ppl;
  bool json = false;
  CLI::App* eval_cmd = app.add_subcommand("eval");
  add_eval_options(*eval_cmd, eval);
  eval_cmd->add_flag("--json", json);
  CLI::App* ppl_cmd = app.add_subcommand("ppl");
  add_ppl_options(*ppl_cmd, ppl);
  ppl_cmd->add_flag("--json", json);
  app.require_subcommand(1, 1);
  std::vector<std::string> args(command.rbegin(), command.rend());  // CLI11 takes them reversed
  try {
    app.parse(args);
    if (ppl_cmd->parsed()) ppl_protocol(ppl);  // its flag combinations
  } catch (const CLI::ParseError& e) {
    std::string text;
    for (const std::string& word : command) text += (text.empty() ? "" : " ") + word;
    fail("sweep cell `", text, "`: ", e.what());
  }
  if (eval_cmd->parsed()) return eval;
  return ppl;
}

const std::string& cell_model_path(const CellRequest& request) {
  return std::visit([](const auto& r) -> const std::string& { return r.model.model_path; }, request);
}

CellInputs cell_inputs(const CellRequest& request) {
  CellInputs inputs;
  const ModelOptions& model =
      std::visit([](const auto& r) -> const ModelOptions& { return r.model; }, request);
  inputs.files.push_back(model.model_path);
  for (const std::string& text : model.policies)
    for (const auto& [key, value] : PolicySpec::parse(text).options)
      if (is_file_option(key)) inputs.files.push_back(value);
  if (const EvalRequest* r = std::get_if<EvalRequest>(&request)) {
    inputs.data_dir = r->selection.data_dir;
  } else {
    const PplRequest& p = std::get<PplRequest>(request);
    if (!p.file.empty()) inputs.files.push_back(p.file);
    if (!p.dataset.empty()) inputs.data_dir = p.data_dir;
  }
  return inputs;
}

nlohmann::json run_cell_shard(const Model& model, CellRequest request, const Shard& shard, int threads,
                              const std::string& samples_path) {
  if (EvalRequest* r = std::get_if<EvalRequest>(&request)) {
    r->shard = shard;
    r->samples_path = samples_path;
    if (threads) r->model.threads = threads;
    std::vector<std::unique_ptr<TaskRun>> runs = load_eval_tasks(*r);
    return nlohmann::json::parse(eval_report(model, *r, runs).dump());
  }
  PplRequest& r = std::get<PplRequest>(request);
  r.shard = shard;
  r.samples_path = samples_path;
  if (threads) r.model.threads = threads;
  const PplCorpus corpus =
      r.file.empty() ? load_ppl_corpus(r.dataset, r.data_dir) : PplCorpus{r.file, read_text_file(r.file)};
  return ppl_report(model, r, corpus, false);
}

nlohmann::json merge_cell_shards(const CellRequest& request, const std::vector<nlohmann::json>& outputs,
                                 const std::vector<std::string>& samples_paths,
                                 const std::string& merged_samples_path) {
  TS_CHECK(!outputs.empty() && outputs.size() == samples_paths.size(),
           "merging a cell: one output and one samples file per shard, at least one shard");
  try {
    if (const EvalRequest* r = std::get_if<EvalRequest>(&request))
      return merge_eval(*r, outputs, samples_paths, merged_samples_path);
    return merge_ppl(outputs, samples_paths, merged_samples_path);
  } catch (const nlohmann::json::exception& e) {
    fail("merging a cell's shards: a malformed output or record (", e.what(), ")");
  }
}

}  // namespace ts::cli
