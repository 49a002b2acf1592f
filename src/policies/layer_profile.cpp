#include "policies/layer_profile.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "policies/profile_json.h"

namespace ts {
namespace {

constexpr const char* kFormat = "tokensieve-layer-profile";
constexpr int kVersion = 1;

class Fnv1a64 {
 public:
  void bytes(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      mix(w);
    }
    for (; i < n; ++i) mix(p[i]);
  }
  void number(uint64_t v) { mix(v); }
  uint64_t value() const { return h_; }

 private:
  void mix(uint64_t w) { h_ = (h_ ^ w) * 0x100000001b3ull; }
  uint64_t h_ = 0xcbf29ce484222325ull;
};

template <typename T>
T get(const nlohmann::json& j, const char* key, const std::string& path) {
  TS_CHECK(j.contains(key), path, ": missing field \"", key, "\"");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    fail(path, ": field \"", key, "\" has the wrong type");
  }
}

}  // namespace

std::string model_fingerprint(const Model& model) {
  Fnv1a64 h;
  for (const GgufTensor& t : model.gguf().tensors()) {
    h.bytes(t.name.data(), t.name.size());
    h.number(static_cast<uint64_t>(t.type));
    for (uint64_t d : t.dims) h.number(d);
    h.bytes(t.data, t.n_bytes);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h.value()));
  return cat("fnv1a64:", hex);
}

LayerProfile read_layer_profile(const std::string& path) {
  const nlohmann::json j = read_profile_json(path, kFormat);
  TS_CHECK(j.contains("version") && checked_number<int>(j.at("version"), path, "version") == kVersion, path,
           ": profile version ", j.value("version", nlohmann::json()).dump(), " is not supported (expected ",
           kVersion, ")");
  LayerProfile p;
  if (j.contains("model")) p.model_name = get<std::string>(j, "model", path);
  p.model_hash = get<std::string>(j, "model_hash", path);
  p.policy = get<std::string>(j, "policy", path);
  p.method = get<std::string>(j, "method", path);
  TS_CHECK(j.contains("layers"), path, ": missing field \"layers\"");
  p.layers = checked_numbers<uint32_t>(j.at("layers"), path, "layers");
  for (size_t i = 1; i < p.layers.size(); ++i)
    TS_CHECK(p.layers[i - 1] < p.layers[i], path, ": \"layers\" must be ascending without repeats");
  if (j.contains("ratio")) p.ratio = checked_number<double>(j.at("ratio"), path, "ratio");
  TS_CHECK(p.policy != "orthorank" || (p.ratio && *p.ratio >= 0 && *p.ratio <= 1), path,
           ": an orthorank profile needs \"ratio\" in [0, 1]");
  TS_CHECK(j.contains("sparsity"), path, ": missing field \"sparsity\"");
  p.sparsity = checked_number<double>(j.at("sparsity"), path, "sparsity");
  if (j.contains("calibration")) {
    TS_CHECK(j.at("calibration").is_object(), path, ": \"calibration\" must be an object");
    p.calibration_json = j.at("calibration").dump();
  }
  return p;
}

void write_layer_profile(const std::string& path, const LayerProfile& p) {
  nlohmann::ordered_json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["model"] = p.model_name;
  j["model_hash"] = p.model_hash;
  j["policy"] = p.policy;
  j["method"] = p.method;
  j["layers"] = p.layers;
  if (p.ratio) j["ratio"] = *p.ratio;
  j["sparsity"] = p.sparsity;
  j["calibration"] = nlohmann::ordered_json::parse(p.calibration_json);
  std::ofstream f(path, std::ios::trunc);
  f << j.dump(2) << "\n";
  TS_CHECK(f, path, ": cannot write the layer profile");
}

void check_profile_fits(const LayerProfile& profile, const std::string& path, const std::string& policy,
                        const Model& model) {
  TS_CHECK(profile.policy == policy, path, ": a profile for ", profile.policy, ", not for ", policy);
  const std::string hash = model_fingerprint(model);
  TS_CHECK(profile.model_hash == hash, path, ": searched on another model (", profile.model_hash, " ",
           profile.model_name, "), this one is ", hash);
}

}  // namespace ts
