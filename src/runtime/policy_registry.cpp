#include "runtime/policy_registry.h"

#include "core/error.h"

namespace ts {

std::string PolicyEntry::usage() const {
  std::string text;
  for (const PolicyOption& o : options) text += cat(text.empty() ? "[" : "[,", o.usage(), "]");
  return text;
}

std::string PolicyEntry::help() const {
  return cat(name, options.empty() ? "" : ":", usage(), ": ", summary);
}

void PolicyRegistry::add(PolicyEntry entry) {
  for (const PolicyEntry& e : entries_)
    TS_CHECK(e.name != entry.name, "policy ", entry.name, " registered twice");
  entries_.push_back(std::move(entry));
}

std::unique_ptr<Policy> PolicyRegistry::create(std::string_view spec_text) const {
  PolicySpec spec = PolicySpec::parse(spec_text);
  for (const PolicyEntry& e : entries_) {
    if (e.name != spec.name) continue;
    PolicyOptions options(std::move(spec), e.options);
    std::unique_ptr<Policy> p = e.make(options);
    options.finish();
    return p;
  }
  std::string known;
  for (const PolicyEntry& e : entries_) known += cat(known.empty() ? "" : ", ", e.name);
  fail("unknown policy '", spec.name, "' (known: ", known, ")");
}

}  // namespace ts
