// tokensieve tokenize: token ids of a text as a JSON array.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "core/error.h"

namespace ts::cli {
namespace {

struct TokenizeOptions {
  ModelOptions model;
  std::string prompt, file;
  bool no_bos = false, no_special = false;
};

void tokenize(const TokenizeOptions& o) {
  TS_CHECK(o.prompt.empty() || o.file.empty(), "give only one of -p TEXT or -f FILE");
  auto gguf = GgufFile::open(o.model.model_path);
  auto tok = Tokenizer::from_gguf(*gguf);
  const std::string text = o.file.empty() ? o.prompt : read_text_file(o.file);
  const std::vector<int32_t> ids = tok->encode(text, tok->add_bos_default() && !o.no_bos, !o.no_special);
  std::printf("%s\n", nlohmann::json(ids).dump().c_str());
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto opts = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "print the token ids of a text as a JSON array");
  add_model_options(*cmd, opts->model, false);
  auto* p = cmd->add_option("-p,--prompt", opts->prompt, "text");
  auto* f = cmd->add_option("-f,--file", opts->file, "text file");
  p->excludes(f);
  cmd->add_flag("--no-bos", opts->no_bos, "do not add BOS even if the model asks for it");
  cmd->add_flag("--no-special", opts->no_special, "tokenize special-token text as plain text");
  cmd->callback([opts] { tokenize(*opts); });
}

}  // namespace ts::cli
