#include "policies/profile_json.h"

#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <type_traits>

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

template <class T>
T checked_number(const nlohmann::json& v, const std::string& path, std::string_view field) {
  using limits = std::numeric_limits<T>;
  if constexpr (std::is_integral_v<T>) {
    // is_number_unsigned: a non-negative integer literal; is_number_integer: any integer literal.
    const bool fits = v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(limits::max())
                      : v.is_number_integer()
                          ? std::is_signed_v<T> && v.get<int64_t>() >= static_cast<int64_t>(limits::min()) &&
                                v.get<int64_t>() <= static_cast<int64_t>(limits::max())
                          : false;
    TS_CHECK(fits, path, ": \"", field, "\" must be an integer in [", +limits::min(), ", ", +limits::max(),
             "], not ", v.dump());
    return v.is_number_unsigned() ? static_cast<T>(v.get<uint64_t>()) : static_cast<T>(v.get<int64_t>());
  } else {
    TS_CHECK(v.is_number() && std::isfinite(v.get<double>()) &&
                 std::fabs(v.get<double>()) <= static_cast<double>(limits::max()),
             path, ": \"", field, "\" must be a finite number within ", limits::max(), ", not ", v.dump());
    return static_cast<T>(v.get<double>());
  }
}

template <class T>
std::vector<T> checked_numbers(const nlohmann::json& v, const std::string& path, std::string_view field) {
  TS_CHECK(v.is_array(), path, ": \"", field, "\" must be an array");
  std::vector<T> out;
  out.reserve(v.size());
  for (const nlohmann::json& x : v) out.push_back(checked_number<T>(x, path, field));
  return out;
}

template int checked_number<int>(const nlohmann::json&, const std::string&, std::string_view);
template uint32_t checked_number<uint32_t>(const nlohmann::json&, const std::string&, std::string_view);
template uint64_t checked_number<uint64_t>(const nlohmann::json&, const std::string&, std::string_view);
template double checked_number<double>(const nlohmann::json&, const std::string&, std::string_view);
template std::vector<uint32_t> checked_numbers<uint32_t>(const nlohmann::json&, const std::string&,
                                                         std::string_view);
template std::vector<float> checked_numbers<float>(const nlohmann::json&, const std::string&,
                                                   std::string_view);

}  // namespace ts
