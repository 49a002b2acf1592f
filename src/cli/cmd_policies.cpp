// tokensieve policies: every policy with its options, as each declares them (policies/*/*.cpp).
#include <cstdio>

#include "cli/cli_common.h"
#include "policies/builtin_policies.h"

namespace ts::cli {

void register_policies(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("policies", "list the token-sparsification policies and their options");
  cmd->add_flag(
      "--json", *json,
      R"(print [{"name", "class", "summary", "usage", "options": [{"key", "type", "default", "help", ...}]}])");
  cmd->callback([json] {
    if (*json) {
      std::printf("%s\n", describe_policies(builtin_policies()).dump().c_str());
      return;
    }
    for (const PolicyEntry& e : builtin_policies().entries()) {
      std::printf("%s: %s\n", e.name.c_str(), e.summary.c_str());
      for (const PolicyOption& o : e.options) std::printf("  %-22s %s\n", o.usage().c_str(), o.help.c_str());
    }
  });
}

}  // namespace ts::cli
