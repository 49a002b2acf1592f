#pragma once
// Requests may name files in their policies (profile=, predictor=); the server opens only files
// under the directories it was given, so a client cannot make it read anything else on the host.
#include <string>
#include <vector>

namespace ts::server {

// Throws a 400 ApiError when an option of is_file_option in `specs` names a path outside every
// directory of `allowed_dirs` (after resolving "..", symbolic links and relative paths).
void check_policy_files(const std::vector<std::string>& specs, const std::vector<std::string>& allowed_dirs);

}  // namespace ts::server
