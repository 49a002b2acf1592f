#include "eval/mc_tasks.h"

#include "eval/data_file.h"
#include "eval/python_text.h"

namespace ts {
namespace {

// lm-eval's target_delimiter between a context and its continuation.
constexpr std::string_view kTargetDelimiter = " ";

const std::string& string_item(const nlohmann::json& array, size_t i, const char* field,
                               const SourceLine& at) {
  if (!array.at(i).is_string()) fail_at(at, "'", field, "' item ", i, " is not a string");
  return array.at(i).get_ref<const std::string&>();
}

// Checks that a separate label file has one label per record of the data file.
void expect_label_count(const std::vector<int64_t>& labels, const std::string& labels_path, size_t records,
                        const std::string& data_path) {
  TS_CHECK(labels.size() == records, labels_path, ": ", labels.size(), " labels for ", records,
           " records in ", data_path);
}

std::vector<McExample> load_arc(const std::string& data_dir, const char* file) {
  const std::string path = data_dir + "/arc/original/" + file;
  std::vector<McExample> out;
  read_jsonl(path, [&](const nlohmann::json& rec, const SourceLine& at) {
    const nlohmann::json& question = object_field(rec, "question", at);
    const nlohmann::json& options = array_field(question, "choices", at);
    const std::string& answer = string_field(rec, "answerKey", at);
    std::vector<std::string> texts;
    size_t gold = options.size();
    for (size_t i = 0; i < options.size(); ++i) {
      if (!options[i].is_object()) fail_at(at, "'choices' item ", i, " is not an object");
      texts.push_back(string_field(options[i], "text", at));
      if (string_field(options[i], "label", at) == answer && gold == options.size()) gold = i;
    }
    if (gold == options.size()) fail_at(at, "answerKey '", answer, "' is not among the choice labels");
    // lm-eval arc_easy.yaml / arc_challenge.yaml.
    out.push_back(
        shared_context_example("Question: " + string_field(question, "stem", at) + "\nAnswer:", texts, gold));
  });
  return out;
}

}  // namespace

McExample shared_context_example(const std::string& context, const std::vector<std::string>& choices,
                                 size_t gold) {
  McExample ex;
  ex.gold = gold;
  for (const std::string& choice : choices)
    ex.choices.push_back({context, std::string(kTargetDelimiter) + choice, py::length(choice)});
  return ex;
}

McExample winogrande_example(std::string_view sentence, const std::string& option1,
                             const std::string& option2, size_t gold) {
  // lm-eval tasks/winogrande/preprocess_winogrande.py.
  const size_t blank = sentence.find('_');
  TS_CHECK(blank != std::string_view::npos, "the sentence has no '_' to fill");
  const std::string continuation =
      std::string(kTargetDelimiter) + std::string(py::strip(sentence.substr(blank + 1)));
  McExample ex;
  ex.gold = gold;
  for (const std::string* option : {&option1, &option2}) {
    std::string context = std::string(sentence.substr(0, blank)) + *option;
    const size_t norm_length = py::length(context);
    ex.choices.push_back({std::move(context), continuation, norm_length});
  }
  return ex;
}

std::string hellaswag_preprocess(std::string_view text) {
  std::string s = py::replace(py::strip(text), " [title]", ". ");
  // re.sub("\\[.*?\\]", "", s): a '[' up to the nearest ']' with no newline between ('.' stops
  // at newlines); a '[' with no such ']' stays.
  std::string unbracketed;
  for (size_t pos = 0; pos < s.size();) {
    const size_t close = s[pos] == '[' ? s.find_first_of("]\n", pos + 1) : std::string::npos;
    if (close != std::string::npos && s[close] == ']') {
      pos = close + 1;
    } else {
      unbracketed += s[pos++];
    }
  }
  return py::replace(unbracketed, "  ", " ");
}

std::vector<McExample> load_piqa(const std::string& data_dir) {
  const std::string path = data_dir + "/piqa/original/valid.jsonl";
  const std::string labels_path = data_dir + "/piqa/original/valid-labels.lst";
  std::vector<McExample> out;
  read_jsonl(path, [&](const nlohmann::json& rec, const SourceLine& at) {
    // lm-eval piqa.yaml; the gold label comes from the separate label file.
    out.push_back(shared_context_example("Question: " + string_field(rec, "goal", at) + "\nAnswer:",
                                         {string_field(rec, "sol1", at), string_field(rec, "sol2", at)}, 0));
  });
  const std::vector<int64_t> labels = read_label_lines(labels_path, 0, 1);
  expect_label_count(labels, labels_path, out.size(), path);
  for (size_t i = 0; i < out.size(); ++i) out[i].gold = static_cast<size_t>(labels[i]);
  return out;
}

std::vector<McExample> load_arc_easy(const std::string& data_dir) {
  return load_arc(data_dir, "ARC-Easy-Test.jsonl");
}

std::vector<McExample> load_arc_challenge(const std::string& data_dir) {
  return load_arc(data_dir, "ARC-Challenge-Test.jsonl");
}

std::vector<McExample> load_hellaswag(const std::string& data_dir) {
  const std::string path = data_dir + "/hellaswag/hellaswag_val.random1000.orig.jsonl";
  std::vector<McExample> out;
  read_jsonl(path, [&](const nlohmann::json& rec, const SourceLine& at) {
    // lm-eval tasks/hellaswag/utils.py process_docs.
    const std::string ctx =
        string_field(rec, "ctx_a", at) + " " + py::capitalize(string_field(rec, "ctx_b", at));
    const std::string query = hellaswag_preprocess(string_field(rec, "activity_label", at) + ": " + ctx);
    const nlohmann::json& endings = array_field(rec, "endings", at);
    std::vector<std::string> choices;
    for (size_t i = 0; i < endings.size(); ++i)
      choices.push_back(hellaswag_preprocess(string_item(endings, i, "endings", at)));
    const int64_t label = int_field(rec, "label", at);
    if (label < 0 || static_cast<size_t>(label) >= choices.size())
      fail_at(at, "label ", label, " is out of range");
    out.push_back(shared_context_example(query, choices, static_cast<size_t>(label)));
  });
  return out;
}

std::vector<McExample> load_winogrande(const std::string& data_dir) {
  const std::string path = data_dir + "/winogrande/original/dev.jsonl";
  const std::string labels_path = data_dir + "/winogrande/original/dev-labels.lst";
  std::vector<McExample> out;
  read_jsonl(path, [&](const nlohmann::json& rec, const SourceLine& at) {
    const std::string& sentence = string_field(rec, "sentence", at);
    if (sentence.find('_') == std::string::npos) fail_at(at, "the sentence has no '_' to fill");
    out.push_back(
        winogrande_example(sentence, string_field(rec, "option1", at), string_field(rec, "option2", at), 0));
  });
  const std::vector<int64_t> labels = read_label_lines(labels_path, 1, 2);  // option 1 or 2
  expect_label_count(labels, labels_path, out.size(), path);
  for (size_t i = 0; i < out.size(); ++i) out[i].gold = static_cast<size_t>(labels[i] - 1);
  return out;
}

std::vector<McExample> load_boolq(const std::string& data_dir) {
  const std::string path = data_dir + "/boolq/boolq_validation.llmfoundry.jsonl";
  std::vector<McExample> out;
  read_jsonl(path, [&](const nlohmann::json& rec, const SourceLine& at) {
    // The file's query is "Passage: {passage}\nQuestion: {question}?"; lm-eval's boolq prompt is
    // "{passage}\nQuestion: {question}?\nAnswer:" with choices "no"/"yes" (gold 1 = yes).
    constexpr std::string_view kPrefix = "Passage: ";
    const std::string& query = string_field(rec, "query", at);
    if (!query.starts_with(kPrefix) || query.find("\nQuestion: ") == std::string::npos ||
        !query.ends_with("?"))
      fail_at(at, "query is not \"Passage: ...\\nQuestion: ...?\"");
    const nlohmann::json& choices = array_field(rec, "choices", at);
    if (choices != nlohmann::json::array({"no", "yes"})) fail_at(at, "choices are not [\"no\", \"yes\"]");
    const int64_t gold = int_field(rec, "gold", at);
    if (gold != 0 && gold != 1) fail_at(at, "gold ", gold, " is not 0 or 1");
    out.push_back(shared_context_example(query.substr(kPrefix.size()) + "\nAnswer:", {"no", "yes"},
                                         static_cast<size_t>(gold)));
  });
  return out;
}

const std::vector<McTask>& mc_tasks() {
  static const std::vector<McTask> tasks = {
      {"piqa", load_piqa},           {"arc_easy", load_arc_easy},     {"arc_challenge", load_arc_challenge},
      {"hellaswag", load_hellaswag}, {"winogrande", load_winogrande}, {"boolq", load_boolq},
  };
  return tasks;
}

const McTask& find_mc_task(std::string_view name) {
  std::string known;
  for (const McTask& t : mc_tasks()) {
    if (t.name == name) return t;
    known += (known.empty() ? "" : ", ") + std::string(t.name);
  }
  fail("unknown task '", name, "' (known: ", known, ")");
}

}  // namespace ts
