// tokensieve train-butler: trains a TokenButler predictor (paper 001) for a model against its own
// attention logits and writes it as a safetensors file (policies/tokenbutler/butler_file.h).
//
//   tokensieve train-butler -m MODEL --train FILE[@FIRST:LAST]... --tokens N --out FILE
//
// Training text: plain text files (one document) or JSON Lines (field "text", else "context",
// one document per line; @FIRST:LAST picks documents FIRST..LAST-1). Documents are joined with
// EOS and cut into chunks of --seq tokens; chunks where one token makes up over 70% are dropped
// (the authors' filter). --tokens N trains N / --seq steps, cycling through the chunks in a
// seeded order. A checkpoint (FILE.ckpt) is written every --checkpoint-every steps and at the
// end; --resume continues from it bit for bit (same flags and thread count); --reschedule lets
// it continue under another --tokens (a shorter or longer schedule from the checkpoint's step).
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "core/error.h"
#include "core/progress.h"
#include "eval/data_file.h"
#include "policies/tokenbutler/butler_training.h"

namespace ts::cli {
namespace {

struct TrainOptions {
  ModelOptions model;
  std::vector<std::string> train;
  size_t tokens = 0, seq = 512, checkpoint_every = 25, stop_after = 0, loss_rows = 0;
  uint32_t imp_dim = 16, inter = 128;
  double lr = 1e-3;
  uint64_t seed = 1;
  std::string out, init;
  bool resume = false, reschedule = false, f16 = false, json = false;
};

// The documents of one --train argument.
std::vector<std::string> read_documents(const std::string& arg) {
  std::string path = arg;
  size_t first = 0, last = SIZE_MAX;
  if (const size_t at = arg.rfind('@'); at != std::string::npos) {
    path = arg.substr(0, at);
    const std::string range = arg.substr(at + 1);
    const size_t colon = range.find(':');
    TS_CHECK(colon != std::string::npos, "--train ", arg, ": the range is @FIRST:LAST");
    try {
      first = std::stoul(range.substr(0, colon));
      last = std::stoul(range.substr(colon + 1));
    } catch (const std::exception&) {
      fail("--train ", arg, ": the range is @FIRST:LAST (numbers)");
    }
    TS_CHECK(first < last, "--train ", arg, ": empty document range");
  }
  std::vector<std::string> docs;
  if (!path.ends_with(".jsonl")) {
    docs.push_back(read_text_file(path));
    return docs;
  }
  size_t index = 0;
  read_jsonl(path, [&](const nlohmann::json& obj, const SourceLine& at) {
    if (index >= first && index < last)
      docs.push_back(string_field(obj, obj.contains("text") ? "text" : "context", at));
    ++index;
  });
  TS_CHECK(!docs.empty(), "--train ", arg, ": no documents in that range");
  return docs;
}

std::vector<std::vector<int32_t>> make_chunks(const std::vector<std::string>& args, const Tokenizer& tok,
                                              size_t seq) {
  std::vector<int32_t> stream;
  for (const std::string& arg : args)
    for (const std::string& doc : read_documents(arg)) {
      const std::vector<int32_t> ids = tok.encode(doc, false, false);
      stream.insert(stream.end(), ids.begin(), ids.end());
      stream.push_back(tok.eos());
    }
  std::vector<std::vector<int32_t>> chunks;
  for (size_t s = 0; s + seq <= stream.size(); s += seq) {
    std::vector<int32_t> c(stream.begin() + static_cast<std::ptrdiff_t>(s),
                           stream.begin() + static_cast<std::ptrdiff_t>(s + seq));
    std::vector<int32_t> sorted = c;
    std::ranges::sort(sorted);
    size_t run = 1, longest = 1;
    for (size_t i = 1; i < sorted.size(); ++i)
      longest = std::max(longest, run = sorted[i] == sorted[i - 1] ? run + 1 : 1);
    if (longest * 10 <= seq * 7) chunks.push_back(std::move(c));
  }
  TS_CHECK(!chunks.empty(), "train-butler: the training text gives no chunk of ", seq, " tokens");
  return chunks;
}

// Stored parameters of the model (tied output counted once), the base of the predictor's share.
size_t model_params(const Model& model) {
  size_t n = 0;
  for (const GgufTensor& t : model.gguf().tensors()) n += t.n_elements;
  return n;
}

void train_butler(const TrainOptions& o) {
  auto model = Model::load(o.model.model_path);
  const ModelConfig& mc = model->config();
  TS_CHECK(mc.n_embd % 8 == 0, "train-butler: hidden size ", mc.n_embd, " is not a multiple of 8");
  ButlerConfig cfg;
  cfg.n_embd = mc.n_embd;
  cfg.n_reduced = mc.n_embd / 8;
  cfg.n_heads = mc.n_heads;
  cfg.n_layers = mc.n_layers;
  cfg.n_query_heads = mc.n_heads;
  cfg.imp_dim = o.imp_dim;
  cfg.inter = o.inter;
  cfg.rope_base = mc.ropes[0].base;
  cfg.check();

  std::vector<std::vector<int32_t>> chunks = make_chunks(o.train, model->tokenizer(), o.seq);
  const size_t n_chunks = chunks.size();
  ButlerTrainOptions t;
  t.steps = std::max<size_t>(1, o.tokens / o.seq);
  t.lr = o.lr;
  t.seed = o.seed;
  t.loss_rows = o.loss_rows;
  ThreadPool pool(o.model.threads);
  ButlerTrainer trainer(*model, pool, cfg, t, std::move(chunks));
  const size_t params = trainer.weights().n_params();
  const double pct = 100.0 * static_cast<double>(params) / static_cast<double>(model_params(*model));
  std::fprintf(stderr,
               "predictor: %zu parameters (%.3f%% of the model's %zu); %zu chunks of %zu tokens, %zu steps\n",
               params, pct, model_params(*model), n_chunks, o.seq, t.steps);
  const std::string ckpt = o.out + ".ckpt";
  if (!o.init.empty()) trainer.start_from(o.init);
  if (o.resume) {
    TS_CHECK(std::filesystem::exists(ckpt), "--resume: no checkpoint ", ckpt);
    trainer.resume(ckpt, o.reschedule);
    std::fprintf(stderr, "resumed at step %zu\n", trainer.steps_done());
  }
  std::map<std::string, std::string> meta = {{"model", mc.name},
                                             {"train_tokens", std::to_string(t.steps * o.seq)},
                                             {"seq", std::to_string(o.seq)},
                                             {"loss_rows", o.loss_rows ? std::to_string(o.loss_rows) : "all"},
                                             {"params", std::to_string(params)}};
  if (!o.init.empty()) meta["init"] = o.init;
  if (o.reschedule) meta["rescheduled_at_step"] = std::to_string(trainer.steps_done());
  Progress progress("train-butler", t.steps);
  double loss = 0.0, loss_avg = 0.0;
  const size_t stop = o.stop_after ? std::min(o.stop_after, t.steps) : t.steps;
  while (trainer.steps_done() < stop) {
    loss = trainer.step();
    loss_avg = loss_avg == 0.0 ? loss : 0.95 * loss_avg + 0.05 * loss;
    progress.update(trainer.steps_done(),
                    cat("loss ", loss_avg, " lr ", trainer.lr_at(trainer.steps_done())));
    if (trainer.steps_done() % o.checkpoint_every == 0 || trainer.steps_done() == stop)
      trainer.save_checkpoint(ckpt, meta);
  }
  progress.finish();
  meta["final_loss"] = std::to_string(loss_avg);
  if (trainer.steps_done() == t.steps) save_butler(o.out, {trainer.weights(), meta, {}}, o.f16);
  if (o.json) {
    nlohmann::json j = {{"params", params},       {"param_percent", pct}, {"steps", trainer.steps_done()},
                        {"total_steps", t.steps}, {"loss", loss_avg},     {"last_loss", loss},
                        {"out", o.out},           {"checkpoint", ckpt}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("trained %zu/%zu steps, loss %.5f, %zu parameters (%.3f%%) -> %s\n", trainer.steps_done(),
                t.steps, loss_avg, params, pct,
                trainer.steps_done() == t.steps ? o.out.c_str() : ckpt.c_str());
  }
}

}  // namespace

void register_train_butler(CLI::App& app) {
  auto opts = std::make_shared<TrainOptions>();
  CLI::App* cmd =
      app.add_subcommand("train-butler", "train a TokenButler token-importance predictor (paper 001)");
  add_model_options(*cmd, opts->model, /*runs_model=*/false);
  cmd->add_option("--train", opts->train, "training text: FILE or FILE.jsonl[@FIRST:LAST]")->required();
  cmd->add_option("--tokens", opts->tokens, "training tokens (steps = tokens / --seq)")->required();
  cmd->add_option("--out", opts->out, "predictor file to write (checkpoint: FILE.ckpt)")->required();
  cmd->add_option("--seq", opts->seq, "tokens per training chunk")->check(CLI::Range(8, 4096));
  cmd->add_option("--loss-rows", opts->loss_rows,
                  "query rows of each chunk whose logits enter the loss, drawn per step (default: all)")
      ->check(CLI::Range(size_t{1}, size_t{4096}));
  cmd->add_option("--d", opts->imp_dim, "importance query/key width d")->check(CLI::Range(2, 256));
  cmd->add_option("--inter", opts->inter, "hidden width I of the importance nets")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--lr", opts->lr, "peak learning rate")->check(CLI::PositiveNumber);
  cmd->add_option("--seed", opts->seed, "initialisation and data-order seed");
  cmd->add_option("--checkpoint-every", opts->checkpoint_every, "steps between checkpoints")
      ->check(CLI::Range(1, 1 << 30));
  cmd->add_option("--stop-after", opts->stop_after, "stop (with a checkpoint) after this many steps");
  cmd->add_flag("--resume", opts->resume, "continue from FILE.ckpt");
  cmd->add_option("--init", opts->init, "start from this predictor's weights (fine-tuning; fresh optimizer)")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--reschedule", opts->reschedule,
                "with --resume: the checkpoint may be of a run with another --tokens; this run's schedule "
                "applies from its step on (not bit-identical to an uninterrupted run)")
      ->needs("--resume");
  cmd->add_flag("--f16", opts->f16, "store the predictor's weights in F16");
  cmd->add_flag("--json", opts->json, "one JSON object on stdout");
  cmd->callback([opts] { train_butler(*opts); });
}

}  // namespace ts::cli
