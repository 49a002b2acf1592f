#include "server/api_error.h"

namespace ts::server {

nlohmann::json error_body(const std::string& message, const std::string& type, int status) {
  return {{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", status}}}};
}

std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ts::server
