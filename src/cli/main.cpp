// tokensieve: results on stdout, progress and statistics on stderr, one-line errors.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/cli_common.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"tokensieve: GGUF Llama-family inference with dynamic token sparsification"};
  app.require_subcommand(1);
  ts::cli::register_run(app);
  ts::cli::register_ppl(app);
  ts::cli::register_info(app);
  ts::cli::register_policies(app);
  ts::cli::register_tokenize(app);
  ts::cli::register_bench(app);
  ts::cli::register_eval(app);
  ts::cli::register_compare(app);
  ts::cli::register_serve(app);
  ts::cli::register_sweep(app);
  ts::cli::register_train_butler(app);
  ts::cli::register_butler_recall(app);
  ts::cli::register_calibrate(app);
  ts::cli::register_analyze(app);
  ts::cli::register_outliers(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s (see --help)\n", e.what());
    return 2;
  } catch (const ts::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory\n");
    return 1;
  }
  return 0;
}
