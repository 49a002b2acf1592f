#pragma once
// The JSON files a policy reads beside the model (layer profiles, KVSink outlier profiles): opened,
// parsed and checked to be an object of the expected "format", each failure a one-line error
// naming the file.
#include <nlohmann/json.hpp>
#include <string>

namespace ts {

nlohmann::json read_profile_json(const std::string& path, const char* format);

}  // namespace ts
