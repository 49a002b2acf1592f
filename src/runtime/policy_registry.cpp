#include "runtime/policy_registry.h"

#include "core/error.h"

namespace ts {

void PolicyRegistry::add(PolicyEntry entry) {
  for (const PolicyEntry& e : entries_)
    TS_CHECK(e.name != entry.name, "policy ", entry.name, " registered twice");
  entries_.push_back(std::move(entry));
}

std::unique_ptr<Policy> PolicyRegistry::create(std::string_view spec_text) const {
  PolicyOptions options(PolicySpec::parse(spec_text));
  for (const PolicyEntry& e : entries_) {
    if (e.name != options.spec().name) continue;
    std::unique_ptr<Policy> p = e.make(options);
    options.finish();
    return p;
  }
  std::string known;
  for (const PolicyEntry& e : entries_) known += cat(known.empty() ? "" : ", ", e.name);
  fail("unknown policy '", options.spec().name, "' (known: ", known, ")");
}

}  // namespace ts
