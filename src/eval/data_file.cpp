#include "eval/data_file.h"

#include <charconv>
#include <fstream>
#include <sstream>

namespace ts {
namespace {

// Calls on_line(text, where) for each non-blank line, without its line end ("\n" or "\r\n").
void for_each_line(const std::string& path,
                   const std::function<void(std::string_view, const SourceLine&)>& on_line) {
  std::ifstream in(path, std::ios::binary);
  TS_CHECK(in, path, ": cannot open file");
  SourceLine at{path, 0};
  for (std::string line; std::getline(in, line);) {
    ++at.line;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    on_line(line, at);
  }
  TS_CHECK(!in.bad(), path, ": read error");
}

const nlohmann::json& field(const nlohmann::json& obj, const char* key, const SourceLine& at) {
  const auto it = obj.find(key);
  if (it == obj.end()) fail_at(at, "missing field '", key, "'");
  return *it;
}

}  // namespace

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TS_CHECK(in, path, ": cannot open file");
  std::ostringstream ss;
  ss << in.rdbuf();
  TS_CHECK(!in.bad(), path, ": read error");
  return ss.str();
}

void read_jsonl(const std::string& path,
                const std::function<void(const nlohmann::json&, const SourceLine&)>& on_record) {
  for_each_line(path, [&](std::string_view line, const SourceLine& at) {
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      // nlohmann's message starts "[json.exception.parse_error.101] parse error at line 1, ...".
      const std::string what = e.what();
      const size_t detail = what.find("] ");
      fail_at(at, "invalid JSON: ", detail == std::string::npos ? what : what.substr(detail + 2));
    }
    if (!record.is_object()) fail_at(at, "expected a JSON object");
    on_record(record, at);
  });
}

std::vector<int64_t> read_label_lines(const std::string& path, int64_t lo, int64_t hi) {
  std::vector<int64_t> labels;
  for_each_line(path, [&](std::string_view line, const SourceLine& at) {
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
    if (ec != std::errc() || end != line.data() + line.size() || v < lo || v > hi)
      fail_at(at, "expected a label from ", lo, " to ", hi, ", got '", line, "'");
    labels.push_back(v);
  });
  return labels;
}

const std::string& string_field(const nlohmann::json& obj, const char* key, const SourceLine& at) {
  const nlohmann::json& v = field(obj, key, at);
  if (!v.is_string()) fail_at(at, "field '", key, "' is not a string");
  return v.get_ref<const std::string&>();
}

int64_t int_field(const nlohmann::json& obj, const char* key, const SourceLine& at) {
  const nlohmann::json& v = field(obj, key, at);
  if (!v.is_number_integer()) fail_at(at, "field '", key, "' is not an integer");
  return v.get<int64_t>();
}

const nlohmann::json& array_field(const nlohmann::json& obj, const char* key, const SourceLine& at) {
  const nlohmann::json& v = field(obj, key, at);
  if (!v.is_array()) fail_at(at, "field '", key, "' is not an array");
  return v;
}

const nlohmann::json& object_field(const nlohmann::json& obj, const char* key, const SourceLine& at) {
  const nlohmann::json& v = field(obj, key, at);
  if (!v.is_object()) fail_at(at, "field '", key, "' is not an object");
  return v;
}

}  // namespace ts
