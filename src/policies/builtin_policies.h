#pragma once
// The policies this build knows, by name, and the stack the commands attach to a Transformer.
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "runtime/policy_registry.h"
#include "runtime/policy_stack.h"

namespace ts {

const PolicyRegistry& builtin_policies();

// Every entry with its declared options, for /v1/policies, the Python classes and the README table:
// [{"name", "class", "summary", "usage", "options": [{"key", "type", "usage", "default", "help"[, "min", "max"]
// [, "choices"]}]}]; "default" is null where the option has no fallback.
nlohmann::ordered_json describe_policies(const PolicyRegistry& registry);

// The stack for these --policy specs, in order, bound to `model`; no specs: nullptr (dense).
std::unique_ptr<PolicyStack> make_policy_stack(std::span<const std::string> specs, const Model& model);

}  // namespace ts
