#pragma once
// A test fixture over the tokenizer of a real model file, loaded once per suite; the suite is
// skipped when the file is absent (models/ is not in git, ../shared may be elsewhere).
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "model/gguf.h"
#include "model/tokenizer.h"

namespace ts {

template <const std::string& kModel>
class TokenizerFileTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(kModel)) return;
    gguf_ = GgufFile::open(kModel);
    tok_ = Tokenizer::from_gguf(*gguf_);
  }
  static void TearDownTestSuite() {
    tok_.reset();
    gguf_.reset();
  }
  void SetUp() override {
    if (!tok_) GTEST_SKIP() << kModel << " not found";
  }
  static const Tokenizer& tok() { return *tok_; }

 private:
  static inline std::unique_ptr<GgufFile> gguf_;
  static inline std::unique_ptr<Tokenizer> tok_;
};

}  // namespace ts
