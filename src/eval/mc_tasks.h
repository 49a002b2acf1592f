#pragma once
// Zero-shot multiple-choice tasks as lm-evaluation-harness defines them: loaders for the files in
// the shared data directory and the prompt builders of lm-eval's task configs.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ts {

// One answer option as a log-likelihood request: the model scores `continuation` given `context`.
struct McChoice {
  std::string context, continuation;
  size_t norm_length = 0;  // len() of lm-eval's choice string: acc_norm divides the log-likelihood by it
};

struct McExample {
  std::vector<McChoice> choices;
  size_t gold = 0;
};

// A question whose choices share one context: continuation " " + choice (lm-eval's target
// delimiter), normalized by the choice's length. PIQA, ARC, HellaSwag and BoolQ are built so.
McExample shared_context_example(const std::string& context, const std::vector<std::string>& choices,
                                 size_t gold);

// WinoGrande's partial scoring: each option replaces the "_" in the context, and the rest of the
// sentence after the "_" (stripped) is the common continuation. lm-eval's choice strings are the
// contexts, so acc_norm divides by their length. Throws if the sentence has no "_".
McExample winogrande_example(std::string_view sentence, const std::string& option1,
                             const std::string& option2, size_t gold);

// HellaSwag's cleanup of the WikiHow bracket artifacts (lm-eval tasks/hellaswag/utils.py).
std::string hellaswag_preprocess(std::string_view text);

// Loaders: every example of the task in file order; files are looked up under data_dir.
std::vector<McExample> load_piqa(const std::string& data_dir);
std::vector<McExample> load_arc_easy(const std::string& data_dir);
std::vector<McExample> load_arc_challenge(const std::string& data_dir);
std::vector<McExample> load_hellaswag(const std::string& data_dir);
std::vector<McExample> load_winogrande(const std::string& data_dir);
std::vector<McExample> load_boolq(const std::string& data_dir);

struct McTask {
  std::string_view name;
  std::vector<McExample> (*load)(const std::string& data_dir);
};

// Every task `tokensieve eval --task` knows, in the order of its help text.
const std::vector<McTask>& mc_tasks();
// The task of that name; throws naming the known tasks when there is none.
const McTask& find_mc_task(std::string_view name);

}  // namespace ts
