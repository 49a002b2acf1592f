#pragma once
// The Python string operations lm-evaluation-harness's prompt code applies, reproduced on UTF-8
// text. Whitespace and case are ASCII-only: the evaluation files put no other whitespace at the
// ends of fields, and HellaSwag's ctx_b (the one field that is case-mapped) is pure ASCII.
#include <cstddef>
#include <string>
#include <string_view>

namespace ts::py {

std::string_view strip(std::string_view s);   // str.strip()
std::string_view rstrip(std::string_view s);  // str.rstrip()
std::string capitalize(std::string_view s);   // str.capitalize(): first character upper, rest lower
// str.replace(from, to): every non-overlapping occurrence, left to right, in one pass (`from` not empty).
std::string replace(std::string_view s, std::string_view from, std::string_view to);
// len(str): code points, which is what lm-eval's acc_norm divides by.
size_t length(std::string_view utf8);

}  // namespace ts::py
