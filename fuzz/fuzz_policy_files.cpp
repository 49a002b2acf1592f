// libFuzzer target for the files a user passes to a policy: layer profiles (orthorank / sleb /
// shortened), KVSink outlier profiles, and TokenButler predictors (safetensors). The first byte
// picks the reader, the rest is the file; any file must load or raise a ts::Error with a one-line
// message. Any other exception (a JSON type error escaping), a crash or a sanitizer report is a bug.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/error.h"
#include "policies/kvquant/outlier_profile.h"
#include "policies/layer_profile.h"
#include "policies/tokenbutler/butler_file.h"

namespace {

// One file per process (parallel fuzzing jobs do not share it), rewritten for every input.
const std::string& scratch_path() {
  static const std::string path = "/tmp/ts-fuzz-policy-file-" + std::to_string(getpid());
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  {
    std::ofstream f(scratch_path(), std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data + 1), static_cast<std::streamsize>(size - 1));
  }
  try {
    switch (data[0] % 3) {
      case 0:
        ts::read_layer_profile(scratch_path());
        break;
      case 1:
        ts::read_outlier_profile(scratch_path());
        break;
      default:
        ts::load_butler(scratch_path());
        break;
    }
  } catch (const ts::Error& e) {
    if (std::string(e.what()).find('\n') != std::string::npos) std::abort();
  }
  return 0;
}
