#include "server/policy_files.h"

#include <filesystem>

#include "runtime/policy_spec.h"
#include "server/api_error.h"

namespace ts::server {
namespace {

namespace fs = std::filesystem;

bool is_inside(const fs::path& file, const fs::path& dir) {
  const fs::path relative = file.lexically_relative(dir);
  return !relative.empty() && *relative.begin() != ".." && relative != ".";
}

}  // namespace

void check_policy_files(const std::vector<std::string>& specs, const std::vector<std::string>& allowed_dirs) {
  for (const std::string& text : specs) {
    const PolicySpec spec = PolicySpec::parse(text);
    for (const auto& [key, value] : spec.options) {
      if (!is_file_option(key)) continue;
      std::error_code ec;
      const fs::path file = fs::weakly_canonical(fs::absolute(value), ec);
      bool allowed = false;
      std::string dirs;
      for (const std::string& dir : allowed_dirs) {
        std::error_code dir_ec;
        const fs::path root = fs::weakly_canonical(fs::absolute(dir), dir_ec);
        allowed |= !ec && !dir_ec && is_inside(file, root);
        dirs += (dirs.empty() ? "" : ", ") + dir;
      }
      if (!allowed)
        bad_request(spec.name, ": ", key, "=", value, " is not under the server's policy file ",
                    "directories (", dirs.empty() ? "none" : dirs, "; see serve --policy-files)");
    }
  }
}

}  // namespace ts::server
