// Layer profiles: JSON round trip, rejected files, the model fingerprint, and policies reading them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "policies/builtin_policies.h"
#include "policies/layer_profile.h"
#include "policies/orthorank/orthorank.h"
#include "test_paths.h"

namespace ts {
namespace {

const Model& stories() {
  static const auto model = Model::load(shared_path("models/stories260K.gguf"));
  return *model;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ts_profile_" + name)).string();
}

std::string write_text(const std::string& name, const std::string& text) {
  const std::string path = temp_path(name);
  std::ofstream(path) << text;
  return path;
}

LayerProfile stories_profile(std::string policy) {
  LayerProfile p;
  p.model_name = "stories260K";
  p.model_hash = model_fingerprint(stories());
  p.policy = std::move(policy);
  p.method = "sleb";
  p.layers = {1, 3};
  if (p.policy == "orthorank") p.ratio = 0.5;
  p.sparsity = 0.2;
  p.calibration_json = R"({"dataset":"wikitext2","windows":4})";
  return p;
}

TEST(LayerProfile, WriteThenReadGivesTheSameProfile) {
  const LayerProfile p = stories_profile("orthorank");
  const std::string path = temp_path("roundtrip.json");
  write_layer_profile(path, p);
  const LayerProfile q = read_layer_profile(path);
  EXPECT_EQ(q.model_name, p.model_name);
  EXPECT_EQ(q.model_hash, p.model_hash);
  EXPECT_EQ(q.policy, p.policy);
  EXPECT_EQ(q.method, p.method);
  EXPECT_EQ(q.layers, p.layers);
  EXPECT_EQ(q.ratio, p.ratio);
  EXPECT_EQ(q.sparsity, p.sparsity);
  EXPECT_EQ(q.calibration_json, p.calibration_json);
  std::filesystem::remove(path);
}

TEST(LayerProfile, RejectsMalformedFiles) {
  const std::string head =
      R"({"format":"tokensieve-layer-profile","version":1,"model_hash":"x","method":"sleb",)";
  for (const auto& [name, text] : std::vector<std::pair<std::string, std::string>>{
           {"notjson", "{"},
           {"format", R"({"format":"other","version":1})"},
           {"version", R"({"format":"tokensieve-layer-profile","version":2})"},
           {"missing", head + R"("policy":"sleb","sparsity":0.1})"},
           {"order", head + R"("policy":"sleb","layers":[3,1],"sparsity":0.1})"},
           {"type", head + R"("policy":"sleb","layers":"1,3","sparsity":0.1})"},
           {"ratio", head + R"("policy":"orthorank","layers":[1],"sparsity":0.1})"},
           // Found by fuzz_policy_files: a non-string "model" or "format" escaped as a JSON type error.
           {"model", head + R"("model":0,"policy":"sleb","layers":[1],"sparsity":0.1})"},
           {"format_type", R"({"format":7,"version":1})"},
           // Found by fuzz_policy_files' campaign: -1.1192 cast to an unsigned layer (undefined behaviour).
           {"negative_float_layer", head + R"("policy":"sleb","layers":[3,-1.1192],"sparsity":0.1})"},
           {"negative_layer", head + R"("policy":"sleb","layers":[-1],"sparsity":0.1})"},
           {"huge_layer", head + R"("policy":"sleb","layers":[1e30],"sparsity":0.1})"},
           {"version_float", R"({"format":"tokensieve-layer-profile","version":1e300})"},
       }) {
    const std::string path = write_text(name + ".json", text);
    try {
      read_layer_profile(path);
      ADD_FAILURE() << name;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(path, 0), 0u) << e.what();  // names the file
    }
    std::filesystem::remove(path);
  }
  EXPECT_THROW(read_layer_profile(temp_path("does_not_exist.json")), Error);
}

TEST(LayerProfile, FingerprintIsStableAndProfilesMustMatchModelAndPolicy) {
  const std::string h = model_fingerprint(stories());
  EXPECT_EQ(h, model_fingerprint(stories()));
  EXPECT_EQ(h.size(), 8 + 16u);
  EXPECT_EQ(h.rfind("fnv1a64:", 0), 0u);

  LayerProfile p = stories_profile("sleb");
  EXPECT_NO_THROW(check_profile_fits(p, "f", "sleb", stories()));
  EXPECT_THROW(check_profile_fits(p, "f", "shortened", stories()), Error);
  p.model_hash = "fnv1a64:0000000000000000";
  EXPECT_THROW(check_profile_fits(p, "f", "sleb", stories()), Error);
}

TEST(LayerProfile, PoliciesTakeLayersAndRatioFromTheProfile) {
  const std::string path = temp_path("orthorank.json");
  write_layer_profile(path, stories_profile("orthorank"));
  auto from_profile = builtin_policies().create("orthorank:profile=" + path);
  from_profile->bind(stories());
  EXPECT_EQ(from_profile->claims()[0].layers, (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(dynamic_cast<OrthoRank&>(*from_profile).ratio(), 0.5);
  auto overridden = builtin_policies().create("orthorank:ratio=0.25,profile=" + path);
  overridden->bind(stories());
  EXPECT_EQ(dynamic_cast<OrthoRank&>(*overridden).ratio(), 0.25);
  auto wrong_policy = builtin_policies().create("sleb:profile=" + path);
  EXPECT_THROW(wrong_policy->bind(stories()), Error);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace ts
