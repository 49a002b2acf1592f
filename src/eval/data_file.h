#pragma once
// Reading line-oriented evaluation data (JSON Lines, label lists) with errors that name the file
// and the line, e.g. "piqa/original/valid.jsonl:17: missing string field 'goal'".
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace ts {

struct SourceLine {
  std::string file;
  size_t line = 0;  // 1-based
};

template <typename... Args>
[[noreturn]] void fail_at(const SourceLine& at, const Args&... args) {
  fail(at.file, ":", at.line, ": ", args...);
}

// The whole file as bytes.
std::string read_text_file(const std::string& path);

// Calls on_record(object, where) for each line of a JSON Lines file; blank lines are skipped,
// anything that is not one JSON object per line is an error.
void read_jsonl(const std::string& path,
                const std::function<void(const nlohmann::json&, const SourceLine&)>& on_record);

// Integer labels, one per line (blank lines skipped), each in [lo, hi].
std::vector<int64_t> read_label_lines(const std::string& path, int64_t lo, int64_t hi);

// Fields of a JSON object; a missing field or one of another type is an error naming it.
const std::string& string_field(const nlohmann::json& obj, const char* key, const SourceLine& at);
int64_t int_field(const nlohmann::json& obj, const char* key, const SourceLine& at);
const nlohmann::json& array_field(const nlohmann::json& obj, const char* key, const SourceLine& at);
const nlohmann::json& object_field(const nlohmann::json& obj, const char* key, const SourceLine& at);

}  // namespace ts
