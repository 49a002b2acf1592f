// GgufFile: round trips of everything the format can hold, and one test per class of bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numbers>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf_writer.h"
#include "model/gguf.h"
#include "test_paths.h"

namespace {

using ts::GgufFile;
using ts::QuantType;
using ts::test::GgufWriter;
using ts::test::WValue;
using VT = ts::GgufValueType;

constexpr uint64_t kHuge = uint64_t{1} << 60;

std::unique_ptr<GgufFile> parse(const std::vector<uint8_t>& b) { return GgufFile::parse(b, "t.gguf"); }

// Parses a copy in an exact-size heap buffer (so ASan flags any read past the end); returns the error.
std::string error_of(const std::vector<uint8_t>& b) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[b.size()]);
  if (!b.empty()) std::memcpy(copy.get(), b.data(), b.size());
  try {
    GgufFile::parse({copy.get(), b.size()}, "t.gguf");
  } catch (const ts::Error& e) {
    return e.what();
  }
  return "(parsed without error)";
}

// The error is one line, starts with the file name and mentions `needle`.
testing::AssertionResult fails_with(const std::vector<uint8_t>& b, std::string_view needle) {
  const std::string msg = error_of(b);
  if (msg.rfind("t.gguf: ", 0) != 0 || msg.find('\n') != std::string::npos ||
      msg.find(needle) == std::string::npos) {
    return testing::AssertionFailure() << "expected an error mentioning \"" << needle << "\", got: " << msg;
  }
  return testing::AssertionSuccess();
}

void put_u32(std::vector<uint8_t>& b, size_t pos, uint32_t v) { std::memcpy(b.data() + pos, &v, 4); }
void put_u64(std::vector<uint8_t>& b, size_t pos, uint64_t v) { std::memcpy(b.data() + pos, &v, 8); }

std::vector<uint8_t> pattern(size_t n, uint8_t seed = 1) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + 7 * i);
  return v;
}

// A small valid file with metadata and two tensors; the last tensor's data ends the file.
GgufWriter small_model() {
  GgufWriter w;
  w.add("general.architecture", WValue::str("llama"));
  w.add("llama.block_count", WValue::u32(2));
  w.add("tokenizer.ggml.tokens", WValue::strings({"a", "bc", ""}));
  w.add("nested", WValue::array(VT::ARRAY, {WValue::numbers(VT::I16, std::vector<int16_t>{-1, 2})}));
  w.add_f32_tensor("tok", {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  w.add_tensor("q", QuantType::Q4_0, {32}, pattern(18));
  return w;
}

// An array value with a forged element count and no elements.
WValue forged_array(VT elem, uint64_t count) {
  WValue w = WValue::raw(VT::ARRAY, static_cast<uint32_t>(elem));
  const WValue c = WValue::u64(count);
  WValue::append(w.bytes, c.bytes.data(), c.bytes.size());
  return w;
}

GgufWriter with_tensor(std::vector<uint64_t> dims, uint32_t type_id, size_t data_bytes,
                       std::optional<uint64_t> offset = {}, std::string name = "w") {
  GgufWriter w;
  w.add_raw_tensor({std::move(name), type_id, std::move(dims), pattern(data_bytes), offset});
  return w;
}

TEST(Gguf, RoundTripsEveryScalarType) {
  GgufWriter w;
  w.add("u8", WValue::u8(255)).add("i8", WValue::i8(-128)).add("u16", WValue::u16(65535));
  w.add("i16", WValue::i16(-32768)).add("u32", WValue::u32(0xFFFFFFFFu));
  w.add("i32", WValue::i32(std::numeric_limits<int32_t>::min()));
  w.add("u64", WValue::u64(std::numeric_limits<uint64_t>::max()));
  w.add("i64", WValue::i64(std::numeric_limits<int64_t>::min()));
  w.add("f32", WValue::f32(1e-5f)).add("f64", WValue::f64(std::numbers::pi));
  w.add("yes", WValue::boolean(true)).add("no", WValue::boolean(false));
  w.add("s", WValue::str(std::string("h\xC3\xA9llo\0x", 8))).add("empty", WValue::str(""));
  const std::vector<uint8_t> bytes = w.bytes();
  const auto f = parse(bytes);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  ASSERT_EQ(f->metadata().size(), 14u);
  EXPECT_EQ(f->metadata()[0].first, "u8");
  EXPECT_EQ(f->require("u8").type, VT::U8);
  EXPECT_EQ(f->get_u64("u8", 0), 255u);
  EXPECT_EQ(f->require("i8").as_i64("i8"), -128);
  EXPECT_EQ(f->require("i8").type, VT::I8);
  EXPECT_EQ(f->get_u64("u16", 0), 65535u);
  EXPECT_EQ(f->require("i16").as_i64("i16"), -32768);
  EXPECT_EQ(f->get_u64("u32", 0), 0xFFFFFFFFu);
  EXPECT_EQ(f->require("i32").as_i64("i32"), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(f->get_u64("u64", 0), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f->require("i64").as_i64("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(static_cast<float>(f->get_f64("f32", 0)), 1e-5f);
  EXPECT_EQ(f->require("f32").type, VT::F32);
  EXPECT_EQ(f->get_f64("f64", 0), std::numbers::pi);
  EXPECT_EQ(f->get_f64("u32", 0), 4294967295.0);  // integers widen to double
  EXPECT_TRUE(f->get_bool("yes", false));
  EXPECT_FALSE(f->get_bool("no", true));
  EXPECT_EQ(f->get_string("s", ""), std::string("h\xC3\xA9llo\0x", 8));
  EXPECT_EQ(f->get_string("empty", "fallback"), "");
  EXPECT_TRUE(f->tensors().empty());
}

TEST(Gguf, AccessorsCheckTypesAndName) {
  GgufWriter w;
  w.add("neg", WValue::i32(-1)).add("big", WValue::u64(std::numeric_limits<uint64_t>::max()));
  w.add("name", WValue::str("x")).add("flag", WValue::boolean(true));
  const std::vector<uint8_t> bytes = w.bytes();
  const auto f = parse(bytes);
  EXPECT_EQ(f->get_u64("missing", 7), 7u);
  EXPECT_EQ(f->get_string("missing", "fb"), "fb");
  EXPECT_EQ(f->get_f64("missing", 0.5), 0.5);
  EXPECT_TRUE(f->get_bool("missing", true));
  EXPECT_EQ(f->find("missing"), nullptr);
  try {
    f->require("llama.block_count");
    FAIL();
  } catch (const ts::Error& e) {
    EXPECT_STREQ(e.what(), "t.gguf: missing metadata key llama.block_count");
  }
  try {
    f->get_u64("name", 0);
    FAIL();
  } catch (const ts::Error& e) {
    EXPECT_EQ(std::string(e.what()), "t.gguf: name: expected an unsigned integer, got STRING");
  }
  EXPECT_THROW(f->get_u64("neg", 0), ts::Error);
  EXPECT_EQ(f->require("neg").as_i64("neg"), -1);
  EXPECT_THROW(f->require("big").as_i64("big"), ts::Error);
  EXPECT_THROW(f->get_string("flag", ""), ts::Error);
  EXPECT_THROW(f->get_bool("name", false), ts::Error);
  EXPECT_THROW(f->get_f64("name", 0), ts::Error);
  EXPECT_THROW(f->require("name").as_array("name"), ts::Error);
}

TEST(Gguf, RoundTripsArraysOfEveryTypeAndNesting) {
  GgufWriter w;
  w.add("u8s", WValue::numbers(VT::U8, std::vector<uint8_t>{0, 1, 255}));
  w.add("i32s", WValue::numbers(VT::I32, std::vector<int32_t>{-5, 7}));
  w.add("f32s", WValue::numbers(VT::F32, std::vector<float>{0.25f, -1.5f}));
  w.add("f64s", WValue::numbers(VT::F64, std::vector<double>{1e300}));
  w.add("u64s", WValue::numbers(VT::U64, std::vector<uint64_t>{1, uint64_t{1} << 63}));
  w.add("bools", WValue::array(VT::BOOL, {WValue::boolean(true), WValue::boolean(false)}));
  w.add("strs", WValue::strings({"x", "", "yz"}));
  w.add("none", WValue::array(VT::STRING, {}));
  // Four levels of arrays: the deepest allowed.
  WValue deep = WValue::strings({"leaf"});
  for (int i = 0; i < 3; ++i) deep = WValue::array(VT::ARRAY, {deep, deep});
  w.add("deep", deep);
  const std::vector<uint8_t> bytes = w.bytes();
  const auto f = parse(bytes);

  const auto& u8s = f->require("u8s");
  EXPECT_EQ(u8s.type, VT::ARRAY);
  EXPECT_EQ(u8s.elem_type, VT::U8);
  ASSERT_EQ(u8s.as_array("u8s").size(), 3u);
  EXPECT_EQ(u8s.as_array("u8s")[2].as_u64("x"), 255u);
  EXPECT_EQ(f->require("i32s").as_array("")[0].as_i64(""), -5);
  EXPECT_EQ(f->require("f32s").as_array("")[1].as_f64(""), -1.5);
  EXPECT_EQ(f->require("f64s").as_array("")[0].as_f64(""), 1e300);
  EXPECT_EQ(f->require("u64s").as_array("")[1].as_u64(""), uint64_t{1} << 63);
  EXPECT_FALSE(f->require("bools").as_array("")[1].as_bool(""));
  const auto& strs = f->require("strs").as_array("");
  ASSERT_EQ(strs.size(), 3u);
  EXPECT_EQ(strs[2].as_string(""), "yz");
  EXPECT_EQ(f->require("none").elem_type, VT::STRING);
  EXPECT_TRUE(f->require("none").as_array("").empty());

  const ts::GgufValue* v = &f->require("deep");
  for (int level = 0; level < 3; ++level) {
    EXPECT_EQ(v->elem_type, VT::ARRAY);
    ASSERT_EQ(v->as_array("").size(), 2u);
    v = &v->as_array("")[1];
  }
  EXPECT_EQ(v->elem_type, VT::STRING);
  EXPECT_EQ(v->as_array("")[0].as_string(""), "leaf");
}

TEST(Gguf, PlacesTensorsAtAlignedOffsets) {
  for (uint32_t alignment : {1u, 2u, 32u, 64u, 4096u}) {
    GgufWriter w;
    if (alignment != 32) w.set_alignment(alignment);
    w.add_f32_tensor("a", {3}, {1, 2, 3});
    w.add_tensor("b", QuantType::Q8_0, {32, 2}, pattern(68, 3));
    w.add_tensor("c", QuantType::Q6_K, {256}, pattern(210, 5));
    w.add_tensor("d", QuantType::F16, {5}, pattern(10, 9));
    const std::vector<uint8_t> bytes = w.bytes();
    const auto f = parse(bytes);
    EXPECT_EQ(f->alignment(), alignment);
    ASSERT_EQ(f->tensors().size(), 4u);
    const ts::GgufTensor* b = f->find_tensor("b");
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->type, QuantType::Q8_0);
    EXPECT_EQ(b->dims, (std::vector<uint64_t>{32, 2}));
    EXPECT_EQ(b->n_elements, 64u);
    EXPECT_EQ(b->n_bytes, 68u);
    EXPECT_EQ(std::vector<uint8_t>(b->data, b->data + b->n_bytes), pattern(68, 3));
    EXPECT_EQ(f->find_tensor("c")->n_bytes, 210u);
    EXPECT_EQ(f->find_tensor("zzz"), nullptr);
    for (const ts::GgufTensor& t : f->tensors()) {
      EXPECT_EQ(t.offset % alignment, 0u) << t.name;
      EXPECT_EQ(static_cast<size_t>(t.data - bytes.data()) % alignment, 0u) << t.name;
    }
    float a[3];
    std::memcpy(a, f->find_tensor("a")->data, sizeof a);
    EXPECT_EQ(a[2], 3.0f);
  }
}

TEST(Gguf, AcceptsVersion2AndTensorlessFiles) {
  GgufWriter w = small_model();
  w.version = 2;
  const std::vector<uint8_t> v2 = w.bytes();
  EXPECT_EQ(parse(v2)->version(), 2u);
  GgufWriter meta_only;
  meta_only.add("k", WValue::u8(1));
  const std::vector<uint8_t> bytes = meta_only.bytes();  // ends right after the metadata
  EXPECT_EQ(parse(bytes)->metadata().size(), 1u);
}

TEST(Gguf, OpensFilesFromDisk) {
  const std::string path = testing::TempDir() + "/ts_test_gguf_open.gguf";
  small_model().write(path);
  const auto f = GgufFile::open(path);
  EXPECT_EQ(f->name(), path);
  EXPECT_EQ(f->get_string("general.architecture", ""), "llama");
  EXPECT_EQ(f->find_tensor("q")->n_bytes, 18u);
  std::remove(path.c_str());
  EXPECT_THROW(GgufFile::open(path), ts::Error);
}

TEST(Gguf, RejectsWrongMagicAndVersions) {
  std::vector<uint8_t> b = small_model().bytes();
  b[3] = 'L';
  EXPECT_TRUE(fails_with(b, "not a GGUF file"));
  EXPECT_TRUE(fails_with({'G', 'G', 'M'}, "not a GGUF file"));
  EXPECT_TRUE(fails_with({}, "truncated: header"));
  b = small_model().bytes();
  put_u32(b, 4, 1);
  EXPECT_TRUE(fails_with(b, "GGUF version 1 is not supported"));
  put_u32(b, 4, 4);
  EXPECT_TRUE(fails_with(b, "unsupported GGUF version 4"));
  put_u32(b, 4, 0x03000000);
  EXPECT_TRUE(fails_with(b, "big-endian"));
}

TEST(Gguf, RejectsEveryTruncation) {
  const std::vector<uint8_t> full = small_model().bytes();
  ASSERT_NO_THROW(parse(full));
  for (size_t n = 0; n < full.size(); ++n) {
    const std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_TRUE(fails_with(prefix, "")) << "prefix of " << n << " bytes";
  }
  std::vector<uint8_t> cut(full.begin(), full.begin() + 120);  // inside the third key
  EXPECT_TRUE(fails_with(cut, "truncated: metadata key 3 of 4 ends past end of file"));
}

TEST(Gguf, RejectsAbsurdCounts) {
  std::vector<uint8_t> b = small_model().bytes();
  put_u64(b, 16, kHuge);
  EXPECT_TRUE(fails_with(b, "header claims 1152921504606846976 metadata keys but only"));
  b = small_model().bytes();
  put_u64(b, 8, kHuge);
  EXPECT_TRUE(fails_with(b, "header claims 1152921504606846976 tensors but only"));
  b = small_model().bytes();
  put_u64(b, 24, kHuge);  // the first key's length
  EXPECT_TRUE(fails_with(b, "key length 1152921504606846976 exceeds"));
  for (VT elem : {VT::U8, VT::F64, VT::STRING, VT::ARRAY, VT::BOOL}) {
    GgufWriter w;
    w.add("a", forged_array(elem, kHuge));
    EXPECT_TRUE(fails_with(w.bytes(), "only 0 bytes remain"));
  }
  GgufWriter w;  // claims 3 elements, holds 2
  WValue a = WValue::numbers(VT::U32, std::vector<uint32_t>{1, 2});
  a.bytes[4] = 3;
  w.add("a", a);
  EXPECT_TRUE(fails_with(
      w.bytes(),
      "'a': truncated or corrupt: array of 3 U32 needs at least 4 bytes each but only 8 bytes remain"));
  GgufWriter s;
  s.add("s", WValue::raw(VT::STRING, kHuge));
  EXPECT_TRUE(fails_with(s.bytes(), "truncated: metadata key 1 of 1 's' ends past end of file"));
}

TEST(Gguf, RejectsBadMetadataValues) {
  WValue deep = WValue::numbers(VT::U8, std::vector<uint8_t>{1});
  for (int i = 0; i < 4; ++i) deep = WValue::array(VT::ARRAY, {deep});
  EXPECT_TRUE(fails_with(GgufWriter().add("d", deep).bytes(), "nested more than 4 deep"));
  EXPECT_TRUE(fails_with(GgufWriter().add("t", WValue::raw(static_cast<VT>(13), uint8_t{0})).bytes(),
                         "metadata key 1 of 1 't': unknown value type 13"));
  EXPECT_TRUE(fails_with(GgufWriter().add("t", forged_array(static_cast<VT>(99), 0)).bytes(),
                         "unknown value type 99"));
  EXPECT_TRUE(fails_with(GgufWriter().add("b", WValue::raw(VT::BOOL, uint8_t{2})).bytes(), "invalid BOOL"));
  EXPECT_TRUE(fails_with(GgufWriter().add("", WValue::u8(1)).add("k", WValue::u64(1)).bytes(), "empty key"));
  EXPECT_TRUE(fails_with(GgufWriter().add("k", WValue::u8(1)).add("k", WValue::u8(2)).bytes(),
                         "duplicate metadata key 'k'"));
  EXPECT_TRUE(fails_with(GgufWriter().add("a\nb", WValue::u8(1)).add("a\nb", WValue::u8(2)).bytes(),
                         "duplicate metadata key 'a\\x0ab'"));  // names are escaped: still one line
}

TEST(Gguf, RejectsBadAlignment) {
  for (uint32_t a : {0u, 3u, 48u}) {
    GgufWriter w = small_model();
    w.add("general.alignment", WValue::u32(a));
    EXPECT_TRUE(fails_with(w.bytes(), "general.alignment must be a nonzero power of two")) << a;
  }
  EXPECT_TRUE(fails_with(GgufWriter().add("general.alignment", WValue::i32(-32)).bytes(),
                         "general.alignment: expected a non-negative integer"));
  EXPECT_TRUE(fails_with(GgufWriter().add("general.alignment", WValue::str("32")).bytes(),
                         "general.alignment: expected an unsigned integer, got STRING"));
}

TEST(Gguf, RejectsBadTensorInfo) {
  const uint32_t f32 = 0, q4_0 = 2;
  EXPECT_TRUE(fails_with(with_tensor({4}, f32, 16, {}, "").bytes(), "empty tensor name"));
  EXPECT_TRUE(fails_with(with_tensor({4}, f32, 16, {}, std::string(65, 'n')).bytes(),
                         "tensor name length 65 exceeds the limit of 64"));
  EXPECT_NO_THROW(parse(with_tensor({4}, f32, 16, {}, std::string(64, 'n')).bytes()));
  EXPECT_TRUE(
      fails_with(with_tensor({}, f32, 0).bytes(), "tensor info 1 of 1 'w': n_dims 0 is outside 1..4"));
  EXPECT_TRUE(fails_with(with_tensor({1, 1, 1, 1, 1}, f32, 4).bytes(), "n_dims 5"));
  EXPECT_TRUE(fails_with(with_tensor({4, 0}, f32, 0).bytes(), "dimension 1 is 0"));
  EXPECT_TRUE(fails_with(with_tensor({uint64_t{1} << 32, uint64_t{1} << 32}, f32, 4).bytes(),
                         "element count overflows 64 bits"));
  EXPECT_TRUE(fails_with(with_tensor({uint64_t{1} << 62, 2}, f32, 4).bytes(), "byte size overflows 64 bits"));
  EXPECT_TRUE(
      fails_with(with_tensor({4}, 99, 4).bytes(), "tensor info 1 of 1 'w': unknown tensor type id 99"));
  EXPECT_TRUE(fails_with(with_tensor({256}, 16, 66).bytes(), "'w': unsupported tensor type IQ2_XXS (id 16)"));
  EXPECT_TRUE(
      fails_with(with_tensor({16, 2}, q4_0, 18).bytes(), "row length 16 is not a multiple of the Q4_0"));
  GgufWriter dup = with_tensor({4}, f32, 16);
  dup.add_raw_tensor({"w", f32, {4}, pattern(16), {}});
  EXPECT_TRUE(fails_with(dup.bytes(), "duplicate tensor name 'w'"));
}

TEST(Gguf, RejectsBadTensorOffsets) {
  EXPECT_TRUE(
      fails_with(with_tensor({4}, 0, 16, 4).bytes(), "'w': offset 4 is not a multiple of the alignment 32"));
  EXPECT_TRUE(
      fails_with(with_tensor({4}, 0, 16, 1 << 20).bytes(), "truncated: tensor 'w' data (offset 1048576"));
  EXPECT_TRUE(fails_with(with_tensor({4}, 0, 16, ~uint64_t{31}).bytes(), "ends past end of file"));
  // Data that starts inside the file but runs past its end.
  GgufWriter w = with_tensor({4}, 0, 16);
  w.add_raw_tensor({"x", 0, {8}, pattern(16), 32});
  EXPECT_TRUE(fails_with(w.bytes(), "tensor 'x' data (offset 32, 32 bytes) ends past end of file"));
}

// Random corruption of a valid file must give a model or a ts::Error, never a crash or another exception.
TEST(Gguf, SurvivesRandomCorruption) {
  const std::vector<uint8_t> good = small_model().bytes();
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> b = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      const size_t pos = rng() % b.size();
      b[pos] =
          (rng() % 4 == 0) ? static_cast<uint8_t>(rng()) : static_cast<uint8_t>(b[pos] ^ (1u << (rng() % 8)));
    }
    if (rng() % 8 == 0) b.resize(rng() % b.size());
    const std::string msg = error_of(b);
    EXPECT_EQ(msg.find('\n'), std::string::npos);
  }
}

TEST(Gguf, LoadsStories260K) {
  const auto f = GgufFile::open(ts::shared_path("models/stories260K.gguf"));
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->metadata().size(), 19u);
  EXPECT_EQ(f->get_string("general.architecture", ""), "llama");
  EXPECT_EQ(f->get_string("tokenizer.ggml.model", ""), "llama");
  EXPECT_EQ(f->get_u64("llama.block_count", 0), 5u);
  EXPECT_EQ(f->get_u64("llama.embedding_length", 0), 64u);
  EXPECT_EQ(f->get_u64("llama.feed_forward_length", 0), 172u);
  EXPECT_EQ(f->get_u64("llama.attention.head_count", 0), 8u);
  EXPECT_EQ(f->get_u64("llama.attention.head_count_kv", 0), 4u);
  EXPECT_EQ(f->get_u64("llama.context_length", 0), 2048u);
  EXPECT_EQ(static_cast<float>(f->get_f64("llama.attention.layer_norm_rms_epsilon", 0)), 1e-5f);
  EXPECT_EQ(f->get_u64("tokenizer.ggml.bos_token_id", 9), 1u);
  EXPECT_EQ(f->get_u64("tokenizer.ggml.padding_token_id", 0), 0xFFFFFFFFu);
  const auto& tokens = f->require("tokenizer.ggml.tokens").as_array("tokens");
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[1].as_string("token"), "<s>");
  EXPECT_EQ(tokens[300].as_string("token"), "\xE2\x96\x81ha");  // "▁ha"
  EXPECT_EQ(f->require("tokenizer.ggml.scores").elem_type, VT::F32);
  EXPECT_EQ(f->require("tokenizer.ggml.token_type").elem_type, VT::I32);

  ASSERT_EQ(f->tensors().size(), 48u);
  for (const ts::GgufTensor& t : f->tensors()) EXPECT_EQ(t.type, QuantType::F32) << t.name;
  const ts::GgufTensor* emb = f->find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->dims, (std::vector<uint64_t>{64, 512}));
  EXPECT_EQ(emb->n_bytes, 64u * 512u * 4u);
  float first[2];
  std::memcpy(first, emb->data, sizeof first);
  EXPECT_EQ(first[0], -0.29474878311157227f);
  EXPECT_EQ(first[1], 0.5618956089019775f);
  ASSERT_NE(f->find_tensor("blk.4.ffn_norm.weight"), nullptr);
  EXPECT_EQ(f->find_tensor("blk.4.ffn_norm.weight")->dims, (std::vector<uint64_t>{64}));
}

}  // namespace
