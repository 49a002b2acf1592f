#pragma once
// Policies by name: each entry builds a policy from its options (checking them, without a model).
// The built-in set is filled by the policies layer (policies/builtin_policies.h).
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/policy.h"

namespace ts {

struct PolicyEntry {
  std::string name;
  std::string help;  // one line: what it does and its options
  // Reads its options with take_*; the registry calls finish() afterwards.
  std::function<std::unique_ptr<Policy>(PolicyOptions&)> make;
};

class PolicyRegistry {
 public:
  void add(PolicyEntry entry);
  // Throws ts::Error for unknown names, malformed specs and bad or unknown options.
  std::unique_ptr<Policy> create(std::string_view spec_text) const;
  const std::vector<PolicyEntry>& entries() const { return entries_; }

 private:
  std::vector<PolicyEntry> entries_;
};

}  // namespace ts
