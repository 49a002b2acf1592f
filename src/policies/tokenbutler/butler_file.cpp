#include "policies/tokenbutler/butler_file.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "kernels/quant_types.h"
#include "policies/profile_json.h"

namespace ts {
namespace {

using json = nlohmann::json;

// The config as metadata strings (safetensors metadata values are strings).
void config_to_metadata(const ButlerConfig& c, json& meta) {
  meta["format"] = "tokensieve.tokenbutler.v1";
  meta["n_embd"] = std::to_string(c.n_embd);
  meta["n_reduced"] = std::to_string(c.n_reduced);
  meta["n_heads"] = std::to_string(c.n_heads);
  meta["n_layers"] = std::to_string(c.n_layers);
  meta["first_layer"] = std::to_string(c.first_layer);
  meta["n_query_heads"] = std::to_string(c.n_query_heads);
  meta["imp_dim"] = std::to_string(c.imp_dim);
  meta["inter"] = std::to_string(c.inter);
  meta["rope_base"] = std::to_string(c.rope_base);
}

ButlerConfig config_from_metadata(const json& meta, const std::string& path) {
  const auto get = [&](const char* key) -> std::string {
    TS_CHECK(meta.contains(key) && meta[key].is_string(), path, ": TokenButler file lacks metadata ", key);
    return meta[key].get<std::string>();
  };
  TS_CHECK(get("format") == "tokensieve.tokenbutler.v1", path, ": not a TokenButler predictor file");
  // Whole numbers only, and small enough that the shapes they make cannot overflow.
  const auto u32 = [&](const char* key) {
    const std::string text = get(key);
    uint32_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    TS_CHECK(ec == std::errc() && end == text.data() + text.size() && v <= (1u << 20), path, ": metadata ",
             key, " = '", text, "' is not a count up to 2^20");
    return v;
  };
  ButlerConfig c;
  c.n_embd = u32("n_embd");
  c.n_reduced = u32("n_reduced");
  c.n_heads = u32("n_heads");
  c.n_layers = u32("n_layers");
  c.first_layer = u32("first_layer");
  c.n_query_heads = u32("n_query_heads");
  c.imp_dim = u32("imp_dim");
  c.inter = u32("inter");
  const std::string base = get("rope_base");
  char* end = nullptr;
  c.rope_base = std::strtof(base.c_str(), &end);
  TS_CHECK(!base.empty() && *end == '\0' && std::isfinite(c.rope_base) && c.rope_base > 0, path,
           ": metadata rope_base = '", base, "' is not a positive number");
  c.check();
  return c;
}

}  // namespace

void save_butler(const std::string& path, const ButlerFile& file, bool f16) {
  json header;
  json meta = json::object();
  config_to_metadata(file.weights.config, meta);
  for (const auto& [k, v] : file.metadata) meta[k] = v;
  header["__metadata__"] = meta;
  std::vector<std::pair<std::string, const std::vector<float>*>> tensors;
  std::vector<std::vector<size_t>> shapes;
  file.weights.for_each([&](const char* name, size_t rows, size_t cols, const std::vector<float>& t) {
    tensors.emplace_back(name, &t);
    shapes.push_back(cols == 1 ? std::vector<size_t>{rows} : std::vector<size_t>{rows, cols});
  });
  for (const auto& [name, t] : file.extra) {
    tensors.emplace_back(name, &t);
    shapes.push_back({t.size()});
  }
  size_t offset = 0;
  const size_t elem = f16 ? 2 : 4;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const size_t bytes = tensors[i].second->size() * elem;
    header[tensors[i].first] = {
        {"dtype", f16 ? "F16" : "F32"}, {"shape", shapes[i]}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    TS_CHECK(out.good(), "cannot write ", tmp);
    const uint64_t n = text.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& [name, t] : tensors) {
      if (f16) {
        std::vector<uint16_t> h(t->size());
        for (size_t j = 0; j < h.size(); ++j) h[j] = float_to_fp16((*t)[j]);
        out.write(reinterpret_cast<const char*>(h.data()), static_cast<std::streamsize>(h.size() * 2));
      } else {
        out.write(reinterpret_cast<const char*>(t->data()), static_cast<std::streamsize>(t->size() * 4));
      }
    }
    TS_CHECK(out.good(), "error writing ", tmp);
  }
  TS_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename ", tmp, " to ", path);
}

namespace {

ButlerFile read_butler(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TS_CHECK(in.good(), "cannot open TokenButler predictor ", path);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  TS_CHECK(in.good() && n > 0 && n < (64u << 20), path, ": not a safetensors file");
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  TS_CHECK(in.good(), path, ": truncated header");
  const json header = json::parse(text, nullptr, false);
  TS_CHECK(!header.is_discarded() && header.is_object() && header.contains("__metadata__"), path,
           ": bad safetensors header");
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ButlerFile f;
  const ButlerConfig config = config_from_metadata(header.at("__metadata__"), path);
  // The weights the config names must be in the file (2 bytes each at least) before any is allocated.
  ButlerWeights shape;
  shape.config = config;
  uint64_t values = 0;
  shape.for_each(
      [&](const char*, size_t rows, size_t cols, std::vector<float>&) { values += uint64_t{rows} * cols; });
  TS_CHECK(values * 2 <= data.size(), path, ": the config needs ", values, " weights; the file holds ",
           data.size(), " bytes");
  f.weights = ButlerWeights::zeros(config);
  for (const auto& [k, v] : header.at("__metadata__").items()) f.metadata[k] = v.get<std::string>();
  const auto read_tensor = [&](const std::string& name, std::vector<float>& t, bool sized) {
    TS_CHECK(header.contains(name), path, ": tensor ", name, " missing");
    const json& e = header.at(name);
    const std::string dtype = e.at("dtype").get<std::string>();
    TS_CHECK(dtype == "F32" || dtype == "F16", path, ": tensor ", name, " has dtype ", dtype);
    const size_t elem = dtype == "F16" ? 2 : 4;
    const size_t begin = checked_number<uint64_t>(e.at("data_offsets").at(0), path, "data_offsets"),
                 end = checked_number<uint64_t>(e.at("data_offsets").at(1), path, "data_offsets");
    TS_CHECK(begin <= end && end <= data.size() && (end - begin) % elem == 0, path, ": tensor ", name,
             " lies outside the file");
    const size_t count = (end - begin) / elem;
    TS_CHECK(!sized || count == t.size(), path, ": tensor ", name, " has ", count,
             " values, the config needs ", t.size());
    t.resize(count);
    if (elem == 4) {
      std::memcpy(t.data(), data.data() + begin, count * 4);
    } else {
      for (size_t j = 0; j < count; ++j) {
        uint16_t h;
        std::memcpy(&h, data.data() + begin + 2 * j, 2);
        t[j] = fp16_to_float(h);
      }
    }
  };
  f.weights.for_each(
      [&](const char* name, size_t, size_t, std::vector<float>& t) { read_tensor(name, t, true); });
  for (const auto& item : header.items()) {
    // A named variable, not a structured binding: clang 14 cannot capture bindings in the lambda below.
    const std::string& name = item.key();
    if (name == "__metadata__" || f.weights.config.n_embd == 0) continue;
    bool is_weight = false;
    f.weights.for_each(
        [&](const char* w, size_t, size_t, const std::vector<float>&) { is_weight |= name == w; });
    if (!is_weight) read_tensor(name, f.extra[name], false);
  }
  return f;
}

}  // namespace

ButlerFile load_butler(const std::string& path) {
  try {
    return read_butler(path);
  } catch (const json::exception& e) {  // a header field of the wrong JSON type
    fail(path, ": bad safetensors header (", e.what(), ")");
  }
}

}  // namespace ts
