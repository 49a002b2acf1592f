#pragma once
// The JSON files a policy reads beside the model (layer profiles, KVSink outlier profiles, a
// predictor's safetensors header): opened, parsed and checked to be an object of the expected
// "format", and their numbers read checked; each failure a one-line error naming the file.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace ts {

nlohmann::json read_profile_json(const std::string& path, const char* format);

// A JSON number as T. nlohmann's get<T> casts whatever number is there: -1.5 or 1e30 into an
// unsigned field, or 1e300 into a float, is undefined behaviour (the policy-file fuzzer found the
// first in a layer profile). These take only what T holds: an integer in T's range for an integer
// type, a finite number in range for a floating type.
template <class T>
T checked_number(const nlohmann::json& v, const std::string& path, std::string_view field);
// An array of such numbers.
template <class T>
std::vector<T> checked_numbers(const nlohmann::json& v, const std::string& path, std::string_view field);

}  // namespace ts
