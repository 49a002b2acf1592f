#include "model/gguf.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <iterator>
#include <limits>
#include <unordered_set>

#include "core/error.h"

static_assert(std::endian::native == std::endian::little, "GGUF is read in place as little-endian");

namespace ts {
namespace {

constexpr int kMaxArrayDepth = 4;  // arrays of arrays deeper than this are rejected (no real use)
// Every metadata value costs ~48 bytes in memory but may take 1 byte in the file; this caps the
// total (about 400 MB) so a crafted file cannot make us allocate without bound.
constexpr uint64_t kMaxValues = uint64_t{1} << 23;
constexpr uint64_t kMaxKeyLen = 65535;   // GGUF spec limit
constexpr uint64_t kMaxTensorName = 64;  // GGUF spec limit
constexpr uint32_t kMaxDims = 4;         // as ggml
// Smallest encodings, used to reject counts that cannot fit in the remaining bytes before allocating.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;                  // key length, 1-byte key, type, u8 value
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;  // name, n_dims, one dim, type, offset

// Indexed by GgufValueType: name, and the smallest encoding (strings: the length; arrays: element type
// and count).
struct ValueTypeInfo {
  const char* name;
  uint64_t min_bytes;
};
constexpr ValueTypeInfo kValueTypes[] = {{"U8", 1},  {"I8", 1},  {"U16", 2},  {"I16", 2},    {"U32", 4},
                                         {"I32", 4}, {"F32", 4}, {"BOOL", 1}, {"STRING", 8}, {"ARRAY", 12},
                                         {"U64", 8}, {"I64", 8}, {"F64", 8}};

const char* value_type_name(uint32_t t) { return t < std::size(kValueTypes) ? kValueTypes[t].name : nullptr; }

uint64_t min_value_bytes(GgufValueType t) { return kValueTypes[static_cast<uint32_t>(t)].min_bytes; }

// Names of ggml tensor types we do not implement, so an error says what the file needs.
std::string tensor_type_problem(uint32_t id) {
  static constexpr std::pair<uint32_t, const char*> kKnown[] = {
      {9, "Q8_1"},   {15, "Q8_K"},   {16, "IQ2_XXS"}, {17, "IQ2_XS"}, {18, "IQ3_XXS"},
      {19, "IQ1_S"}, {20, "IQ4_NL"}, {21, "IQ3_S"},   {22, "IQ2_S"},  {23, "IQ4_XS"},
      {24, "I8"},    {25, "I16"},    {26, "I32"},     {27, "I64"},    {28, "F64"},
      {29, "IQ1_M"}, {34, "TQ1_0"},  {35, "TQ2_0"},   {39, "MXFP4"}};
  for (const auto& [k, name] : kKnown) {
    if (k == id) return cat("unsupported tensor type ", name, " (id ", id, ")");
  }
  return cat("unknown tensor type id ", id);
}

// Quotes a name from the file for an error message: keeps the message on one line and short.
std::string quoted(std::string_view s) {
  constexpr size_t kMax = 80;
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  out += s.size() > kMax ? "'..." : "'";
  return out;
}

std::string describe(const GgufValue& v) {
  const char* name = value_type_name(static_cast<uint32_t>(v.type));
  std::string s = name ? name : "invalid type";
  if (v.type == GgufValueType::ARRAY) {
    const char* elem = value_type_name(static_cast<uint32_t>(v.elem_type));
    s += cat(" of ", elem ? elem : "invalid type");
  }
  return s;
}

// Bounds-checked little-endian reader. `ctx` names the item being read for error messages
// ("metadata key 3 of 19 'general.name'"); it is only formatted into a message on failure.
class Reader {
 public:
  Reader(std::span<const uint8_t> bytes, const std::string& file) : bytes_(bytes), file_(file) {}

  size_t pos() const { return pos_; }
  const uint8_t* here() const { return bytes_.data() + pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }
  std::string ctx;

  template <typename... Args>
  [[noreturn]] void fail_here(const Args&... args) const {
    fail(file_, ": ", ctx, ": ", args...);
  }

  const uint8_t* take(uint64_t n) {
    if (n > remaining()) fail(file_, ": truncated: ", ctx, " ends past end of file");
    const uint8_t* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }

  template <typename T>
  T read() {
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }

  std::string read_string(const char* what, uint64_t max_len) {
    const auto len = read<uint64_t>();
    if (len > max_len) fail_here(what, " length ", len, " exceeds the limit of ", max_len);
    return std::string(reinterpret_cast<const char*>(take(len)), len);
  }

  GgufValueType read_type() {
    const auto t = read<uint32_t>();
    if (!value_type_name(t)) fail_here("unknown value type ", t);
    return static_cast<GgufValueType>(t);
  }

  GgufValue read_value(GgufValueType type, int depth);

 private:
  std::span<const uint8_t> bytes_;
  const std::string& file_;
  size_t pos_ = 0;
  uint64_t values_left_ = kMaxValues;
};

GgufValue Reader::read_value(GgufValueType type, int depth) {
  GgufValue v;
  v.type = type;
  switch (type) {
    case GgufValueType::U8:
      v.value = uint64_t{read<uint8_t>()};
      break;
    case GgufValueType::I8:
      v.value = int64_t{read<int8_t>()};
      break;
    case GgufValueType::U16:
      v.value = uint64_t{read<uint16_t>()};
      break;
    case GgufValueType::I16:
      v.value = int64_t{read<int16_t>()};
      break;
    case GgufValueType::U32:
      v.value = uint64_t{read<uint32_t>()};
      break;
    case GgufValueType::I32:
      v.value = int64_t{read<int32_t>()};
      break;
    case GgufValueType::U64:
      v.value = read<uint64_t>();
      break;
    case GgufValueType::I64:
      v.value = read<int64_t>();
      break;
    case GgufValueType::F32:
      v.value = double{read<float>()};
      break;
    case GgufValueType::F64:
      v.value = read<double>();
      break;
    case GgufValueType::BOOL: {
      const auto b = read<uint8_t>();
      if (b > 1) fail_here("invalid BOOL value ", unsigned{b});
      v.value = b == 1;
      break;
    }
    case GgufValueType::STRING:
      v.value = read_string("string", std::numeric_limits<uint64_t>::max());
      break;
    case GgufValueType::ARRAY: {
      if (depth >= kMaxArrayDepth) fail_here("arrays nested more than ", kMaxArrayDepth, " deep");
      v.elem_type = read_type();
      const auto count = read<uint64_t>();
      const uint64_t min_bytes = min_value_bytes(v.elem_type);
      if (count > remaining() / min_bytes) {
        fail_here("truncated or corrupt: array of ", count, " ",
                  value_type_name(static_cast<uint32_t>(v.elem_type)), " needs at least ", min_bytes,
                  " bytes each but only ", remaining(), " bytes remain");
      }
      if (count > values_left_) fail_here("more than ", kMaxValues, " metadata values in total");
      values_left_ -= count;
      GgufArray items;
      items.reserve(count);
      for (uint64_t i = 0; i < count; ++i) items.push_back(read_value(v.elem_type, depth + 1));
      v.value = std::move(items);
      break;
    }
  }
  return v;
}

void read_header(Reader& r, const std::string& file, uint32_t* version, uint64_t* n_kv, uint64_t* n_tensors) {
  r.ctx = "header";
  // Compare what is there first, so a short non-GGUF file is called that rather than "truncated".
  const size_t have = std::min<size_t>(4, r.remaining());
  if (have > 0 && std::memcmp(r.here(), "GGUF", have) != 0) {
    fail(file, ": not a GGUF file (starts with ",
         quoted(std::string_view(reinterpret_cast<const char*>(r.here()), have)), ", expected 'GGUF')");
  }
  r.take(4);
  *version = r.read<uint32_t>();
  if (*version == 1) fail(file, ": GGUF version 1 is not supported (only versions 2 and 3)");
  if (*version == 0x02000000 || *version == 0x03000000) fail(file, ": big-endian GGUF is not supported");
  if (*version != 2 && *version != 3) {
    fail(file, ": unsupported GGUF version ", *version, " (only versions 2 and 3)");
  }
  *n_tensors = r.read<uint64_t>();
  *n_kv = r.read<uint64_t>();
  if (*n_kv > r.remaining() / kMinKvBytes) {
    fail(file, ": truncated or corrupt: header claims ", *n_kv, " metadata keys but only ", r.remaining(),
         " bytes follow");
  }
}

std::vector<std::pair<std::string, GgufValue>> read_metadata(Reader& r, const std::string& file,
                                                             uint64_t n_kv) {
  std::vector<std::pair<std::string, GgufValue>> out;
  out.reserve(n_kv);
  std::unordered_set<std::string> seen;
  for (uint64_t i = 0; i < n_kv; ++i) {
    r.ctx = cat("metadata key ", i + 1, " of ", n_kv);
    std::string key = r.read_string("key", kMaxKeyLen);
    if (key.empty()) r.fail_here("empty key");
    r.ctx += ' ';  // not `" " + quoted(...)`: trips a GCC 12 -Wrestrict false positive at -O3
    r.ctx += quoted(key);
    if (!seen.insert(key).second) fail(file, ": duplicate metadata key ", quoted(key));
    const GgufValueType type = r.read_type();
    out.emplace_back(std::move(key), r.read_value(type, 0));
  }
  return out;
}

GgufTensor read_tensor_info(Reader& r) {
  GgufTensor t;
  t.name = r.read_string("tensor name", kMaxTensorName);
  if (t.name.empty()) r.fail_here("empty tensor name");
  r.ctx += ' ';
  r.ctx += quoted(t.name);
  const auto n_dims = r.read<uint32_t>();
  if (n_dims < 1 || n_dims > kMaxDims) r.fail_here("n_dims ", n_dims, " is outside 1..", kMaxDims);
  t.n_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const auto dim = r.read<uint64_t>();
    if (dim == 0) r.fail_here("dimension ", d, " is 0");
    if (__builtin_mul_overflow(t.n_elements, dim, &t.n_elements)) {
      r.fail_here("element count overflows 64 bits");
    }
    t.dims.push_back(dim);
  }
  const auto type_id = r.read<uint32_t>();
  const std::optional<QuantTraits> traits = quant_traits(type_id);
  if (!traits) r.fail_here(tensor_type_problem(type_id));
  t.type = traits->type;
  // Kernels work row by row, so each row (dims[0]) must be whole blocks, not just the total.
  if (t.dims[0] % traits->block_elems != 0) {
    r.fail_here("row length ", t.dims[0], " is not a multiple of the ", traits->name, " block size ",
                traits->block_elems);
  }
  static_assert(sizeof(size_t) == sizeof(uint64_t));
  if (__builtin_mul_overflow(t.n_elements / traits->block_elems, traits->block_bytes, &t.n_bytes)) {
    r.fail_here("byte size overflows 64 bits");
  }
  t.offset = r.read<uint64_t>();
  return t;
}

// Tensor data starts at the first multiple of the alignment after the tensor table.
void place_tensors(std::vector<GgufTensor>& tensors, std::span<const uint8_t> bytes, size_t table_end,
                   size_t alignment, const std::string& file) {
  if (tensors.empty()) return;  // the file may end right after the table
  const size_t pad = (alignment - table_end % alignment) % alignment;
  if (pad > bytes.size() - table_end) {
    fail(file, ": truncated: padding before the tensor data ends past end of file");
  }
  const size_t data_start = table_end + pad;
  const uint64_t data_size = bytes.size() - data_start;
  for (GgufTensor& t : tensors) {
    if (t.offset % alignment != 0) {
      fail(file, ": tensor ", quoted(t.name), ": offset ", t.offset, " is not a multiple of the alignment ",
           alignment);
    }
    if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
      fail(file, ": truncated: tensor ", quoted(t.name), " data (offset ", t.offset, ", ", t.n_bytes,
           " bytes) ends past end of file (the data section has ", data_size, " bytes)");
    }
    t.data = bytes.data() + data_start + t.offset;
  }
}

}  // namespace

uint64_t GgufValue::as_u64(std::string_view what) const {
  if (const auto* u = std::get_if<uint64_t>(&value)) return *u;
  if (const auto* i = std::get_if<int64_t>(&value)) {
    if (*i >= 0) return static_cast<uint64_t>(*i);
    fail(what, ": expected a non-negative integer, got ", *i);
  }
  fail(what, ": expected an unsigned integer, got ", describe(*this));
}

int64_t GgufValue::as_i64(std::string_view what) const {
  if (const auto* i = std::get_if<int64_t>(&value)) return *i;
  if (const auto* u = std::get_if<uint64_t>(&value)) {
    if (*u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return static_cast<int64_t>(*u);
    fail(what, ": value ", *u, " does not fit in a signed 64-bit integer");
  }
  fail(what, ": expected an integer, got ", describe(*this));
}

double GgufValue::as_f64(std::string_view what) const {
  if (const auto* d = std::get_if<double>(&value)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&value)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
  fail(what, ": expected a number, got ", describe(*this));
}

bool GgufValue::as_bool(std::string_view what) const {
  if (const auto* b = std::get_if<bool>(&value)) return *b;
  fail(what, ": expected BOOL, got ", describe(*this));
}

const std::string& GgufValue::as_string(std::string_view what) const {
  if (const auto* s = std::get_if<std::string>(&value)) return *s;
  fail(what, ": expected STRING, got ", describe(*this));
}

const GgufArray& GgufValue::as_array(std::string_view what) const {
  if (const auto* a = std::get_if<GgufArray>(&value)) return *a;
  fail(what, ": expected ARRAY, got ", describe(*this));
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->file_ = std::make_unique<MappedFile>(path);
  f->name_ = path;
  f->parse_all(f->file_->bytes());
  return f;
}

std::unique_ptr<GgufFile> GgufFile::parse(std::span<const uint8_t> bytes, std::string name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->name_ = std::move(name);
  f->parse_all(bytes);
  return f;
}

void GgufFile::parse_all(std::span<const uint8_t> bytes) {
  Reader r(bytes, name_);
  uint64_t n_kv = 0, n_tensors = 0;
  read_header(r, name_, &version_, &n_kv, &n_tensors);
  metadata_ = read_metadata(r, name_, n_kv);

  if (const GgufValue* a = find("general.alignment")) {
    const uint64_t v = a->as_u64(cat(name_, ": general.alignment"));
    if (v == 0 || (v & (v - 1)) != 0) {
      fail(name_, ": general.alignment must be a nonzero power of two, got ", v);
    }
    alignment_ = v;
  }

  if (n_tensors > r.remaining() / kMinTensorInfoBytes) {
    fail(name_, ": truncated or corrupt: header claims ", n_tensors, " tensors but only ", r.remaining(),
         " bytes follow the metadata");
  }
  tensors_.reserve(n_tensors);
  std::unordered_set<std::string> seen;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    r.ctx = cat("tensor info ", i + 1, " of ", n_tensors);
    GgufTensor t = read_tensor_info(r);
    if (!seen.insert(t.name).second) fail(name_, ": duplicate tensor name ", quoted(t.name));
    tensors_.push_back(std::move(t));
  }
  place_tensors(tensors_, bytes, r.pos(), alignment_, name_);
}

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const auto& [k, v] : metadata_) {
    if (k == key) return &v;
  }
  return nullptr;
}

const GgufValue& GgufFile::require(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) fail(name_, ": missing metadata key ", key);
  return *v;
}

std::string GgufFile::get_string(std::string_view key, std::string_view fallback) const {
  const GgufValue* v = find(key);
  return v ? v->as_string(cat(name_, ": ", key)) : std::string(fallback);
}

uint64_t GgufFile::get_u64(std::string_view key, uint64_t fallback) const {
  const GgufValue* v = find(key);
  return v ? v->as_u64(cat(name_, ": ", key)) : fallback;
}

double GgufFile::get_f64(std::string_view key, double fallback) const {
  const GgufValue* v = find(key);
  return v ? v->as_f64(cat(name_, ": ", key)) : fallback;
}

bool GgufFile::get_bool(std::string_view key, bool fallback) const {
  const GgufValue* v = find(key);
  return v ? v->as_bool(cat(name_, ": ", key)) : fallback;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  for (const GgufTensor& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace ts
