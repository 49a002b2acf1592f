#pragma once
// Errors: every failure a user can cause is reported as ts::Error with one clear line.
#include <sstream>
#include <stdexcept>
#include <string>

namespace ts {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Concatenates anything streamable into one string (g++ 12 has no std::format).
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(cat(args...));
}

}  // namespace ts

#define TS_CHECK(cond, ...)               \
  do {                                    \
    if (!(cond)) ::ts::fail(__VA_ARGS__); \
  } while (0)
