#include "eval/rouge.h"

#include <algorithm>

namespace ts {
namespace {

bool is_token_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

size_t lcs_length(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  // One row of the dynamic-programming table at a time: row[j] = LCS of a[0..i) and b[0..j).
  std::vector<size_t> row(b.size() + 1, 0), next(b.size() + 1, 0);
  for (const std::string& x : a) {
    for (size_t j = 0; j < b.size(); ++j)
      next[j + 1] = x == b[j] ? row[j] + 1 : std::max(row[j + 1], next[j]);
    std::swap(row, next);
  }
  return row.back();
}

}  // namespace

std::vector<std::string> rouge_tokens(std::string_view text) {
  std::vector<std::string> tokens;
  std::string current;
  for (char c : text) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (is_token_char(c)) {
      current += c;
    } else if (!current.empty()) {
      tokens.push_back(std::move(current));
      current.clear();
    }
  }
  if (!current.empty()) tokens.push_back(std::move(current));
  return tokens;
}

RougeScore rouge_l(std::string_view reference, std::string_view prediction) {
  const std::vector<std::string> ref = rouge_tokens(reference), pred = rouge_tokens(prediction);
  if (ref.empty() || pred.empty()) return {};
  const double lcs = static_cast<double>(lcs_length(ref, pred));
  RougeScore s{lcs / static_cast<double>(pred.size()), lcs / static_cast<double>(ref.size()), 0.0};
  if (s.precision + s.recall > 0) s.f = 2 * s.precision * s.recall / (s.precision + s.recall);
  return s;
}

}  // namespace ts
