// libFuzzer target for policy specs as the CLI, the server and Python pass them: any text must
// build a policy or raise a ts::Error with a one-line message; a parsed spec must print back as a
// spec that parses to itself. Any other exception, crash or sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "policies/builtin_policies.h"
#include "runtime/policy_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const ts::PolicySpec spec = ts::PolicySpec::parse(text);
    if (ts::PolicySpec::parse(spec.text()).text() != spec.text()) std::abort();
  } catch (const ts::Error& e) {
    if (std::string(e.what()).find('\n') != std::string::npos) std::abort();
  }
  try {
    ts::builtin_policies().create(text);
  } catch (const ts::Error& e) {
    if (std::string(e.what()).find('\n') != std::string::npos) std::abort();
  }
  return 0;
}
