#pragma once
// GET /metrics: Prometheus text exposition of the request counts and the engine's state.
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "server/engine.h"

namespace ts::server {

class RequestCounts {
 public:
  void add(const std::string& route, int status);
  std::map<std::pair<std::string, int>, uint64_t> snapshot() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> counts_;  // (route, status) -> requests
};

std::string prometheus_text(const RequestCounts& requests, const EngineStats& engine);

}  // namespace ts::server
