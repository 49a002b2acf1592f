// tokensieve sweep: policies x settings x tasks, one `tokensieve eval` / `tokensieve ppl` process
// per cell. Each finished cell is cached as OUT/cells/<key>.json (key: a hash of the cell's command
// line), its samples as OUT/cells/<key>.samples.jsonl, so rerunning an interrupted sweep skips what
// is done; OUT/sweep.csv is the table, each row paired with its baseline row's samples.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "cli/cli_common.h"
#include "cli/sweep_cells.h"
#include "core/error.h"
#include "core/progress.h"
#include "eval/data_file.h"

extern char** environ;

namespace ts::cli {
namespace {

namespace fs = std::filesystem;

struct SweepOptions {
  std::string spec_path, out_dir;
  SweepSpec flags;  // grid given by flags, added to the spec file's
  std::vector<std::string> policy_rows, setting_rows;
  std::vector<double> sparsities;
  bool json = false;
};

// Runs this executable with `args`, stdout captured, stderr to `log_path`.
CellResult run_self(const std::vector<std::string>& args, const std::string& log_path) {
  int out_pipe[2];
  TS_CHECK(pipe(out_pipe) == 0, "sweep: cannot create a pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  std::vector<std::string> argv_store = {"/proc/self/exe"};
  argv_store.insert(argv_store.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_store) argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  TS_CHECK(rc == 0, "sweep: cannot start ", argv_store[0]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(out_pipe[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(out_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string last, line;
    std::istringstream log(read_text_file(log_path));
    while (std::getline(log, line))
      if (line.find_first_not_of(" \r") != std::string::npos) last = line;
    fail("sweep cell failed (", log_path, "): ", last.empty() ? "no message" : last);
  }
  try {
    return {nlohmann::json::parse(out), seconds};
  } catch (const nlohmann::json::parse_error&) {
    fail("sweep cell printed no JSON (", log_path, ")");
  }
}

SweepSpec build_spec(const SweepOptions& o) {
  // Completed once the flags' rows are in (a spec without settings gets its default row only then).
  SweepSpec spec =
      o.spec_path.empty()
          ? SweepSpec{}
          : parse_sweep_spec(nlohmann::json::parse(read_text_file(o.spec_path), nullptr, false), o.spec_path);
  if (!o.flags.model.empty()) spec.model = o.flags.model;
  if (!o.flags.data_dir.empty()) spec.data_dir = o.flags.data_dir;
  if (o.flags.threads) spec.threads = o.flags.threads;
  spec.tasks.insert(spec.tasks.end(), o.flags.tasks.begin(), o.flags.tasks.end());
  if (!o.sparsities.empty() && o.sparsities.size() != o.policy_rows.size())
    throw CLI::ValidationError("--sparsity", "give one value per --policy row");
  for (size_t i = 0; i < o.policy_rows.size(); ++i) {
    SweepPolicy row;
    // "dense" is the row without policies; "A + B" stacks two specs.
    for (size_t start = 0; o.policy_rows[i] != "dense" && start <= o.policy_rows[i].size();) {
      size_t end = o.policy_rows[i].find(" + ", start);
      if (end == std::string::npos) end = o.policy_rows[i].size();
      row.specs.push_back(o.policy_rows[i].substr(start, end - start));
      start = end + 3;
    }
    if (!o.sparsities.empty()) row.sparsity = o.sparsities[i];
    spec.policies.push_back(std::move(row));
  }
  for (const std::string& s : o.setting_rows) {
    SweepSetting setting;
    std::istringstream words(s);
    for (std::string w; words >> w;) setting.args.push_back(w);
    spec.settings.push_back(std::move(setting));
  }
  complete_sweep_spec(spec);
  return spec;
}

void sweep(const SweepOptions& o) {
  const SweepSpec spec = build_spec(o);
  const std::vector<SweepCell> cells = sweep_cells(spec);
  const fs::path cell_dir = fs::path(o.out_dir) / "cells";
  std::error_code ec;
  fs::create_directories(cell_dir, ec);
  TS_CHECK(!ec, cell_dir.string(), ": cannot create directory (", ec.message(), ")");
  size_t ran = 0, done = 0;
  Progress progress("sweep", cells.size());
  for (const SweepCell& cell : cells) {
    const std::vector<std::string> command = cell_command(spec, cell);
    const CellFiles files = cell_files(o.out_dir, command);
    if (!cached_cell(files.result, command)) {
      std::vector<std::string> run = command;  // the key stays the command's: samples go beside it
      run.insert(run.end(), {"--samples", files.samples});
      write_cell(files.result, command, run_self(run, files.log));
      ++ran;
    }
    progress.update(++done, cat(spec.policies[cell.policy].label, " / ", cell.task));
  }
  progress.finish();
  const std::string csv = write_sweep_table(spec, o.out_dir);
  if (o.json) {
    std::printf(
        "%s\n",
        nlohmann::json{{"csv", csv}, {"cells", cells.size()}, {"ran", ran}, {"cached", cells.size() - ran}}
            .dump()
            .c_str());
  } else {
    std::printf("%s: %zu cells (%zu run, %zu from the cache)\n", csv.c_str(), cells.size(), ran,
                cells.size() - ran);
  }
}

}  // namespace

void register_sweep(CLI::App& app) {
  auto opts = std::make_shared<SweepOptions>();
  CLI::App* cmd = app.add_subcommand(
      "sweep",
      "run a grid of policies x settings x tasks (eval tasks, wikitext2/c4 perplexity), resumable; CSV");
  cmd->add_option(
         "--spec", opts->spec_path,
         "JSON grid: {\"model\", \"threads\", \"data_dir\", \"tasks\": [...], \"policies\": [{\"label\", "
         "\"specs\": [...], \"sparsity\"}], \"settings\": [{\"label\", \"args\": [...]}]}")
      ->check(CLI::ExistingFile);
  cmd->add_option("-o,--out", opts->out_dir, "output directory: cells/ (the cache) and sweep.csv")
      ->required();
  cmd->add_option("-m,--model", opts->flags.model, "GGUF model file");
  cmd->add_option("-t,--threads", opts->flags.threads, "threads of each cell's run")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--data-dir", opts->flags.data_dir, "evaluation data directory passed to each cell");
  cmd->add_option("--task", opts->flags.tasks, "task(s): eval tasks, or wikitext2 / c4 for perplexity")
      ->delimiter(',');
  cmd->add_option("--policy", opts->policy_rows,
                  "a policy row: a --policy spec, several joined by \" + \", or \"dense\"; repeatable")
      ->expected(1)
      ->take_all();
  cmd->add_option("--sparsity", opts->sparsities,
                  "nominal sparsity of each --policy row, in order (for the plot; else measured)")
      ->delimiter(',');
  cmd->add_option("--setting", opts->setting_rows,
                  "a settings row: extra arguments for every cell, e.g. \"--limit 200\"; repeatable")
      ->expected(1)
      ->take_all();
  cmd->add_flag("--json", opts->json, R"(print {"csv", "cells", "ran", "cached"})");
  cmd->callback([opts] { sweep(*opts); });
}

}  // namespace ts::cli
