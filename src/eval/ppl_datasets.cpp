#include "eval/ppl_datasets.h"

#include "eval/data_file.h"

namespace ts {

PplCorpus load_ppl_corpus(std::string_view dataset, const std::string& data_dir) {
  PplCorpus c;
  if (dataset == "wikitext2") {
    c.path = data_dir + "/wikitext2/wiki.test.raw";
    c.text = read_text_file(c.path);
  } else if (dataset == "c4") {
    c.path = data_dir + "/c4/c4-validation.00000-of-00008.first1025.jsonl";
    size_t docs = 0;
    read_jsonl(c.path, [&](const nlohmann::json& rec, const SourceLine& at) {
      if (docs == kC4Documents) return;
      c.text += (docs++ ? " " : "") + string_field(rec, "text", at);
    });
    c.max_windows = kC4Windows;
  } else {
    fail("unknown dataset '", dataset, "' (known: wikitext2, c4)");
  }
  return c;
}

}  // namespace ts
