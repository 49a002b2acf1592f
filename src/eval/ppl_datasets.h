#pragma once
// The corpora `tokensieve ppl --dataset` scores, read from the evaluation data directory.
#include <cstddef>
#include <string>
#include <string_view>

namespace ts {

struct PplCorpus {
  std::string path;  // the file read
  std::string text;
  // The dataset scores whole windows of n_ctx tokens only, at most max_windows of them (0: all
  // tokens, any protocol).
  size_t max_windows = 0;
};

// GPTQ's C4 evaluation (datautils.py, "c4" validation): ' '.join of the first 1100 documents of
// en/c4-validation.00000-of-00008, cut to its first 256 x seqlen tokens, 256 windows of seqlen.
inline constexpr size_t kC4Documents = 1100;
inline constexpr size_t kC4Windows = 256;

// "wikitext2": wikitext2/wiki.test.raw as it is (llama-perplexity reads the file whole).
// "c4": the GPTQ join of c4/c4-validation.00000-of-00008.first1025.jsonl; that file holds only
// the first 1025 documents, which at about 540 tokens each still give 256 windows of 2048.
PplCorpus load_ppl_corpus(std::string_view dataset, const std::string& data_dir);

}  // namespace ts
