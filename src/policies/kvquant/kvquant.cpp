#include "policies/kvquant/kvquant.h"

#include "core/error.h"

namespace ts {

KvQuant::KvQuant(PolicyOptions& options) : Policy(options.spec()) {
  const std::optional<uint64_t> bits = options.take_uint("bits", 2, 8);
  TS_CHECK(bits && valid_code_bits(static_cast<unsigned>(*bits)), "policy ", options.spec().text(),
           ": bits must be 8, 4 or 2");
  format_.bits = static_cast<unsigned>(*bits);
  format_.group = options.take_uint("group", 4, 1u << 16).value_or(128);
  TS_CHECK(format_.group % 4 == 0, "policy ", options.spec().text(), ": group must be a multiple of 4");
  format_.channel_keys = options.take_choice<bool>("mode", {{"token", false}, {"kivi", true}});
  format_.residual = options.take_uint("residual", 0, 1u << 20).value_or(0);
  format_.quantized_prefill = options.take_choice<bool>("prefill", {{"full", false}, {"quantized", true}});
}

}  // namespace ts
