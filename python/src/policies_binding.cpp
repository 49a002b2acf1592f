// The policy registry as data, from which tokensieve.policies builds one class per policy.
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "policies/builtin_policies.h"

namespace ts::python {

void add_policies(nb::module_& m) {
  m.def("policy_registry", [] {
    return nb::module_::import_("json").attr("loads")(describe_policies(builtin_policies()).dump());
  });
  m.def(
      "check_policy", [](const std::string& spec) { builtin_policies().create(spec); }, nb::arg("spec"),
      "Raises tokensieve.Error when the spec names no policy or has a bad option.");
}

}  // namespace ts::python
