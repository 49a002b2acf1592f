#include "policies/profile_json.h"

#include <fstream>

#include "core/error.h"

namespace ts {

nlohmann::json read_profile_json(const std::string& path, const char* format) {
  std::ifstream f(path);
  TS_CHECK(f, path, ": cannot open");
  nlohmann::json j;
  try {
    f >> j;
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": not JSON (", e.what(), ")");
  }
  // Compared as JSON: a "format" of another type is a mismatch, not a type error.
  TS_CHECK(j.is_object() && j.contains("format") && j.at("format") == format, path, ": not a ", format,
           " file");
  return j;
}

}  // namespace ts
