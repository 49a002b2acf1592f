#include "test_paths.h"

namespace ts {
namespace {

std::string joined(std::string root, std::string_view relative) {
  if (!relative.empty()) (root += '/') += relative;
  return root;
}

}  // namespace

std::string source_path(std::string_view relative) { return joined(TS_SOURCE_DIR, relative); }
std::string shared_path(std::string_view relative) { return joined(TS_SOURCE_DIR "/../shared", relative); }

}  // namespace ts
