#pragma once
// Where the tests find the checkout's files and the ../shared data beside it. The absolute
// paths are compiled into test_paths.cpp alone, so every other test object is the same in every
// clone (and ccache can share it).
#include <string>
#include <string_view>

namespace ts {

// The checkout's root joined with relative (no leading '/'), or the root itself.
std::string source_path(std::string_view relative = {});
// ../shared beside the checkout, joined likewise.
std::string shared_path(std::string_view relative = {});

}  // namespace ts
