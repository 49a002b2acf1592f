#include "cli/eval_runs.h"

#include <cstdio>
#include <map>

#include "core/error.h"
#include "core/progress.h"
#include "eval/coref_task.h"
#include "eval/data_file.h"
#include "eval/loglikelihood.h"
#include "eval/long_eval.h"
#include "eval/mc_metrics.h"
#include "eval/mc_tasks.h"
#include "eval/subset.h"

namespace ts::cli {
namespace {

// The TokenButler paper evaluates 100 sequences.
constexpr size_t kCorefExamples = 100;

template <typename T>
std::vector<T> select(std::vector<T> all, const TaskSelection& sel, std::vector<size_t>* indices) {
  *indices = select_examples(all.size(), sel.limit, sel.seed);
  std::vector<T> out;
  for (const size_t i : *indices) out.push_back(std::move(all[i]));
  return out;
}

// Log-likelihood multiple choice (lm-evaluation-harness's PIQA, ARC, HellaSwag, ...).
class McRun : public TaskRun {
 public:
  McRun(const McTask& task, const TaskSelection& sel)
      : TaskRun(std::string(task.name)), examples_(select(task.load(sel.data_dir), sel, &indices_)) {}

  size_t prepare(const Tokenizer& tok, size_t) override {
    size_t longest = 0;
    for (size_t e = 0; e < examples_.size(); ++e) {
      std::vector<TokenizedPair>& pairs = requests_.emplace_back();
      for (const McChoice& c : examples_[e].choices) {
        try {
          pairs.push_back(encode_pair(tok, c.context, c.continuation));
        } catch (const Error& err) {
          fail(name_, " example ", indices_[e], ": ", err.what());
        }
        longest = std::max(longest, pairs.back().context.size() + pairs.back().continuation.size() - 1);
      }
    }
    return longest;
  }

  nlohmann::ordered_json score(Transformer& tf, const Tokenizer&, size_t e) override {
    LoglikelihoodScorer scorer(tf);  // per example: its choices share their context's prefill
    std::vector<double> lls;
    for (const TokenizedPair& pair : requests_[e]) lls.push_back(scorer.score(pair).log_prob);
    const McOutcome outcome = judge(examples_[e], lls);
    nlohmann::json requests = nlohmann::json::array();
    for (const McChoice& c : examples_[e].choices) requests.push_back({c.context, c.continuation});
    return {{"task", name_},
            {"doc_id", indices_[e]},
            {"requests", requests},
            {"lls", lls},
            {"gold", examples_[e].gold},
            {"acc", outcome.correct},
            {"acc_norm", outcome.correct_norm}};
  }

  void add_record(const nlohmann::ordered_json& record) override {
    acc_.add({record.at("acc").get<bool>(), record.at("acc_norm").get<bool>()});
  }
  std::string running_score() const override { return cat("acc ", acc_.metrics().acc); }

  nlohmann::ordered_json metrics() const override {
    const McMetrics m = acc_.metrics();
    return {{"acc", m.acc}, {"acc_norm", m.acc_norm}, {"acc_stderr", m.acc_stderr}, {"n", m.n}};
  }
  std::string summary() const override {
    const McMetrics m = acc_.metrics();
    char buf[96];
    std::snprintf(buf, sizeof buf, "acc %.4f +/- %.4f  acc_norm %.4f", m.acc, m.acc_stderr, m.acc_norm);
    return buf;
  }
  size_t size() const override { return examples_.size(); }

 private:
  std::vector<size_t> indices_;
  std::vector<McExample> examples_;
  std::vector<std::vector<TokenizedPair>> requests_;  // [example][choice]
  McAccumulator acc_;
};

// Greedy generation scored against references (multi_news, needle, kv_retrieval).
class GenRun : public TaskRun {
 public:
  // examples: all of the task's examples, or empty when prepare() generates them.
  GenRun(std::string name, std::vector<GenExample> all, const TaskSelection& sel)
      : TaskRun(std::move(name)), sel_(sel) {
    if (!all.empty()) examples_ = select(std::move(all), sel, &indices_);
  }
  // For the needle task: filler sentences, sized into prompts once the tokenizer exists.
  void set_haystack(std::vector<std::string> sentences) { haystack_ = std::move(sentences); }

  size_t prepare(const Tokenizer& tok, size_t n_ctx) override {
    if (!haystack_.empty()) {
      // As model input (BOS included), so the whole prompt's count is exact.
      const TokenCounter count = [&](std::string_view s) {
        return tok.encode(s, tok.add_bos_default(), true).size();
      };
      examples_ = select(make_needle_examples(haystack_, sel_.grid, count), sel_, &indices_);
    }
    size_t longest = 0;
    for (size_t e = 0; e < examples_.size(); ++e) {
      try {
        longest = std::max(
            longest, gen_prompt_tokens(tok, examples_[e], n_ctx).size() + examples_[e].limits.max_new_tokens);
      } catch (const Error& err) {
        fail(name_, " example ", indices_[e], ": ", err.what());
      }
    }
    return std::min(longest, n_ctx);
  }

  nlohmann::ordered_json score(Transformer& tf, const Tokenizer& tok, size_t e) override {
    const GenRecord r = run_gen_example(tf, tok, examples_[e]);
    return {{"task", name_},
            {"doc_id", indices_[e]},
            {"cell", examples_[e].cell},
            {"prompt_tokens", r.prompt_tokens},
            {"output", r.output},
            {"answers", examples_[e].answers},
            {"score", r.score}};
  }

  void add_record(const nlohmann::ordered_json& record) override {
    const double score = record.at("score").get<double>();
    total_.add(score);
    // Keyed by the cell's text with its keys sorted, as the example's own cell prints.
    const nlohmann::json cell = record.at("cell");
    if (!cell.is_null()) cells_[cell.dump()].add(score);
  }
  std::string running_score() const override { return cat(metric_name(), " ", total_.mean()); }

  nlohmann::ordered_json metrics() const override {
    nlohmann::ordered_json j = {{"metric", metric_name()},
                                {"score", total_.mean()},
                                {"stderr", total_.stderr_of_mean()},
                                {"n", total_.n()}};
    if (!cells_.empty()) {
      nlohmann::ordered_json cells = nlohmann::ordered_json::array();
      for (const auto& [key, acc] : cells_) {
        nlohmann::ordered_json c = nlohmann::ordered_json::parse(key);
        c["score"] = acc.mean();
        c["n"] = acc.n();
        cells.push_back(std::move(c));
      }
      j["cells"] = std::move(cells);
    }
    return j;
  }

  std::string summary() const override {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s %.4f +/- %.4f", metric_name(), total_.mean(), total_.stderr_of_mean());
    std::string s = buf;
    if (!cells_.empty())
      for (const auto& [key, acc] : cells_) s += cat("\n    ", key, ": ", acc.mean(), " (n ", acc.n(), ")");
    return s;
  }
  size_t size() const override { return examples_.size(); }

 private:
  const char* metric_name() const {
    return !examples_.empty() && examples_[0].metric == GenMetric::RougeL ? "rouge_l" : "exact_match";
  }

  TaskSelection sel_;
  std::vector<std::string> haystack_;
  std::vector<size_t> indices_;
  std::vector<GenExample> examples_;
  MeanAccumulator total_;
  std::map<std::string, MeanAccumulator>
      cells_;  // by the cell's JSON text, in sorted order; none without cells
};

// TokenButler's synthetic co-reference task, teacher-forced.
class CorefRun : public TaskRun {
 public:
  explicit CorefRun(const TaskSelection& sel)
      : TaskRun("coref"),
        examples_(select(make_coref_examples(kCorefExamples, sel.grid.seed), sel, &indices_)) {}

  size_t prepare(const Tokenizer& tok, size_t) override {
    size_t longest = 0;
    for (const CorefExample& ex : examples_) {
      const TokenizedPair p = coref_tokens(tok, ex);
      longest = std::max(longest, p.context.size() + p.continuation.size() - 1);
    }
    return longest;
  }

  nlohmann::ordered_json score(Transformer& tf, const Tokenizer& tok, size_t e) override {
    const CorefRecord r = run_coref_example(tf, tok, examples_[e]);
    return {{"task", name_},
            {"doc_id", indices_[e]},
            {"text", examples_[e].context + " " + examples_[e].location},
            {"location_tokens", r.tokens},
            {"acc", r.correct},
            {"coverage", r.coverage}};
  }

  void add_record(const nlohmann::ordered_json& record) override {
    acc_.add(record.at("acc").get<bool>() ? 1.0 : 0.0);
    coverage_.add(record.at("coverage").get<double>());
  }
  std::string running_score() const override { return cat("acc ", acc_.mean()); }

  nlohmann::ordered_json metrics() const override {
    return {{"acc", acc_.mean()},
            {"coverage", coverage_.mean()},
            {"acc_stderr", acc_.stderr_of_mean()},
            {"n", acc_.n()}};
  }
  std::string summary() const override {
    char buf[96];
    std::snprintf(buf, sizeof buf, "acc %.4f +/- %.4f  coverage %.4f", acc_.mean(), acc_.stderr_of_mean(),
                  coverage_.mean());
    return buf;
  }
  size_t size() const override { return examples_.size(); }

 private:
  std::vector<size_t> indices_;
  std::vector<CorefExample> examples_;
  MeanAccumulator acc_, coverage_;
};

const std::vector<std::string> kGenerationTasks = {"multi_news", "needle", "kv_retrieval", "coref"};

}  // namespace

void TaskRun::run(Transformer& tf, const Tokenizer& tok, const Shard& shard, std::ofstream* samples) {
  const auto [begin, end] = shard.range(size());
  Progress progress(name_, end - begin);
  for (size_t e = begin; e < end; ++e) {
    const nlohmann::ordered_json record = score(tf, tok, e);
    if (samples) *samples << record.dump() << '\n';
    tally(record);
    progress.update(e + 1 - begin, running_score());
  }
  progress.finish();
}

std::vector<std::string> eval_task_names() {
  std::vector<std::string> names;
  for (const McTask& t : mc_tasks()) names.emplace_back(t.name);
  names.insert(names.end(), kGenerationTasks.begin(), kGenerationTasks.end());
  return names;
}

std::unique_ptr<TaskRun> load_task_run(const std::string& name, const TaskSelection& sel) {
  if (name == "multi_news") return std::make_unique<GenRun>(name, load_multi_news(sel.data_dir), sel);
  if (name == "needle") {
    const std::string path = sel.data_dir + "/wikitext2/wiki.test.raw";
    auto run = std::make_unique<GenRun>(name, std::vector<GenExample>{}, sel);
    std::vector<std::string> sentences = haystack_sentences(read_text_file(path));
    TS_CHECK(!sentences.empty(), path, ": no sentences to build a haystack from");
    run->set_haystack(std::move(sentences));
    return run;
  }
  if (name == "kv_retrieval") return std::make_unique<GenRun>(name, make_kv_examples(sel.grid), sel);
  if (name == "coref") return std::make_unique<CorefRun>(sel);
  return std::make_unique<McRun>(find_mc_task(name), sel);
}

}  // namespace ts::cli
