// Which files a request's policy may make the server open.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "runtime/policy_spec.h"
#include "server/api_error.h"
#include "server/policy_files.h"

namespace ts::server {
namespace {

namespace fs = std::filesystem;

class PolicyFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("ts_policy_files_" + std::to_string(::getpid()));
    fs::create_directories(root_ / "profiles");
    std::ofstream(root_ / "profiles" / "a.json") << "{}";
    std::ofstream(root_ / "secret.json") << "{}";
    fs::create_symlink(root_ / "secret.json", root_ / "profiles" / "link.json");
  }
  void TearDown() override { fs::remove_all(root_); }

  // The HTTP status check_policy_files answers with, 0 when the specs are allowed.
  int status(const std::string& spec) const {
    try {
      check_policy_files({spec}, {(root_ / "profiles").string()});
      return 0;
    } catch (const ApiError& e) {
      EXPECT_NE(std::string(e.what()).find("--policy-files"), std::string::npos) << e.what();
      return e.status();
    }
  }

  fs::path root_;
};

TEST_F(PolicyFiles, OnlyFilesUnderTheGivenDirectories) {
  const std::string profiles = (root_ / "profiles").string();
  EXPECT_EQ(status("orthorank:profile=" + profiles + "/a.json,ratio=0.5"), 0);
  EXPECT_EQ(status("orthorank:profile=" + profiles + "/missing.json"), 0);  // the policy reports it
  EXPECT_EQ(status("orthorank:layers=3,5,ratio=0.5"), 0);                   // no file option
  EXPECT_EQ(status("orthorank:profile=" + profiles + "/../secret.json"), 400);
  EXPECT_EQ(status("orthorank:profile=" + profiles + "/link.json"), 400);  // a symlink leading out
  EXPECT_EQ(status("tokenbutler:keep=0.5,predictor=/etc/passwd"), 400);
  EXPECT_EQ(status("sleb:profile=" + profiles), 400);  // the directory itself is no file in it
  EXPECT_EQ(status("orthorank:profile=relative/x.json"), 400);
}

TEST(PolicyOptionsPaths, PathOptionsAreOnlyFileOptions) {
  PolicyOptions options(PolicySpec::parse("x:profile=p.json,ratio=0.5"),
                        {path_option("profile", "p"), number_option("ratio", 0, 1, "", "r")});
  EXPECT_EQ(options.path("profile"), "p.json");
  EXPECT_THROW(options.path("ratio"), std::logic_error);
  EXPECT_THROW(path_option("ratio", "r"), std::logic_error);
  EXPECT_TRUE(is_file_option("predictor"));
  EXPECT_FALSE(is_file_option("layers"));
}

}  // namespace
}  // namespace ts::server
