#pragma once
// ROUGE-L as Google's rouge-score package computes it (RougeScorer(["rougeL"]), no stemming): both
// texts are lower-cased, every run of characters other than [a-z0-9] separates tokens, and the
// score is the longest common subsequence of the two token sequences.
#include <string>
#include <string_view>
#include <vector>

namespace ts {

// rouge_score.tokenize.tokenize without a stemmer. Lower-casing is ASCII-only: any other character
// is a separator either way (Python's lower() maps almost nothing outside ASCII into [a-z0-9]).
std::vector<std::string> rouge_tokens(std::string_view text);

struct RougeScore {
  double precision = 0, recall = 0, f = 0;  // all 0 when either text has no tokens
};

// precision = LCS / prediction tokens, recall = LCS / reference tokens, f their harmonic mean.
RougeScore rouge_l(std::string_view reference, std::string_view prediction);

}  // namespace ts
