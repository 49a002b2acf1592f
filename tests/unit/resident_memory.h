#pragma once
// Resident memory of this process, for tests of what stays untouched until written.
#include <unistd.h>

#include <fstream>

// ASan's shadow memory and redzones add resident bytes: GCC says so with __SANITIZE_ADDRESS__,
// clang with __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define TS_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TS_ADDRESS_SANITIZER 1
#endif
#endif

namespace ts {

// Bytes of this process resident in memory now (second field of /proc/self/statm, in pages).
inline long resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

}  // namespace ts
