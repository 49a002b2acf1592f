#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace ts {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TS_CHECK(fd >= 0, path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, ": not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      fail(path, ": mmap failed: ", std::strerror(e));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

void release_pages(const void* p, size_t n) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  // Advisory: if the kernel refuses, the pages merely stay resident.
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

namespace {
// madvise over the pages touching [p, p + n); advisory: if the kernel refuses, nothing changes.
void advise_pages(const void* p, size_t n, int advice) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(p) / page * page;
  const auto end = reinterpret_cast<uintptr_t>(p) + n;
  if (n) ::madvise(reinterpret_cast<void*>(begin), end - begin, advice);
}
}  // namespace

void use_small_pages(const void* p, size_t n) { advise_pages(p, n, MADV_NOHUGEPAGE); }
void use_huge_pages(const void* p, size_t n) { advise_pages(p, n, MADV_HUGEPAGE); }

LargePageBuffer::LargePageBuffer(size_t bytes, bool small_pages) {
  if (bytes == 0) return;
  // Huge pages need 2 MiB-aligned addresses: map one huge page more and start at the first boundary.
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  size_ = bytes + kHuge;
  void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  TS_CHECK(p != MAP_FAILED, "out of memory allocating ", bytes, " bytes: ", std::strerror(errno));
  base_ = static_cast<uint8_t*>(p);
  data_ = base_ + ((kHuge - reinterpret_cast<uintptr_t>(p) % kHuge) % kHuge);
  ::madvise(data_, bytes, small_pages ? MADV_NOHUGEPAGE : MADV_HUGEPAGE);  // advisory, like release_pages
}

size_t LargePageBuffer::resident_bytes() const {
  if (!base_) return 0;
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in_core((size_ + page - 1) / page);
  if (::mincore(base_, size_, in_core.data()) != 0) return 0;  // base_ is page-aligned (mmap)
  return page * static_cast<size_t>(
                    std::count_if(in_core.begin(), in_core.end(), [](unsigned char c) { return c & 1; }));
}

LargePageBuffer::~LargePageBuffer() {
  if (base_) ::munmap(base_, size_);
}

}  // namespace ts
