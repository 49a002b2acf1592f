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
  std::string name;        // in specs: NAME:KEY=VALUE,...
  std::string class_name;  // in Python: tokensieve.policies.<class_name>
  std::string summary;     // one line: what it does
  PolicyOptionList options;
  // Reads the declared options; the registry calls finish() afterwards.
  std::function<std::unique_ptr<Policy>(PolicyOptions&)> make;

  // "[KEY=VALUE][,KEY=VALUE]...": the options as a spec writes them, each at its fallback.
  std::string usage() const;
  std::string help() const;  // "NAME:usage: summary"
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
