#pragma once
// Errors a request can cause, answered with an HTTP status and an OpenAI-style JSON body.
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"

namespace ts::server {

class ApiError : public Error {
 public:
  ApiError(int status, const std::string& message, std::string type = "invalid_request_error")
      : Error(message), status_(status), type_(std::move(type)) {}
  int status() const { return status_; }
  const std::string& type() const { return type_; }

 private:
  int status_;
  std::string type_;
};

template <typename... Args>
[[noreturn]] void bad_request(const Args&... args) {
  throw ApiError(400, cat(args...));
}

// {"error": {"message", "type", "param": null, "code": status}}
nlohmann::json error_body(const std::string& message, const std::string& type, int status);

// JSON text for the wire: invalid UTF-8 (a token that is half a character) becomes U+FFFD.
std::string dump_json(const nlohmann::json& j);

}  // namespace ts::server
