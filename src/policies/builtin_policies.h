#pragma once
// The policies this build knows, by name, and the stack the commands attach to a Transformer.
#include <memory>
#include <span>
#include <string>

#include "runtime/policy_registry.h"
#include "runtime/policy_stack.h"

namespace ts {

const PolicyRegistry& builtin_policies();

// The stack for these --policy specs, in order, bound to `model`; no specs: nullptr (dense).
std::unique_ptr<PolicyStack> make_policy_stack(std::span<const std::string> specs, const Model& model);

}  // namespace ts
