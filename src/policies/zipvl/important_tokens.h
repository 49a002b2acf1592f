#pragma once
// ZipVL's choice of a layer's important tokens from its (probe) attention matrix, paper 004
// Sec. 4.1-4.2: how many by accumulated attention (eq. 7), which by normalized attention (eq. 8-9).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ts {

// Column statistics of one layer's attention matrix, rows = (probe query, head), columns = tokens.
struct ColumnScores {
  std::vector<double> sum;  // a_j: attention token j received (eq. 6)
  std::vector<double> nnz;  // rows that could attend to token j (causal): the non-zeros of column j
};

enum class TokenRank : uint8_t {
  Normalized,  // a_j / nnz_j (eq. 8): mean attention from the queries that see the token
  Sum,         // a_j: biased toward early tokens, which more queries see (the paper's ablation)
};

// Eq. 7: the fewest tokens whose largest column sums reach tau of the matrix's total attention
// (at least 1; every token when tau >= 1).
size_t important_count(std::span<const double> column_sum, double tau);

// Eq. 9: the `count` tokens of largest score, ascending. Ties go to the later token.
std::vector<uint32_t> top_tokens(const ColumnScores& scores, size_t count, TokenRank rank);

}  // namespace ts
