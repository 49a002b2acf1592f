#pragma once
// Resident memory of this process, for tests of what stays untouched until written.
#include <unistd.h>

#include <fstream>

namespace ts {

// Bytes of this process resident in memory now (second field of /proc/self/statm, in pages).
inline long resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

}  // namespace ts
