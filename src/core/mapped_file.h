#pragma once
// Memory of model weights: a read-only map of the whole file (weights used in place), and large-page
// buffers for the copies repacked at load.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

namespace ts {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Drops the resident pages lying wholly inside [p, p + n) of a read-only file mapping, so that
// bytes already copied elsewhere stop counting towards resident memory; touched again, they fault
// back in from the file.
void release_pages(const void* p, size_t n);

// Zeroed anonymous memory that the kernel may back with 2 MiB pages (transparent huge pages in
// "madvise" mode): weights streamed once per token then cost a few TLB misses instead of one per 4 KiB.
class LargePageBuffer {
 public:
  LargePageBuffer() = default;
  explicit LargePageBuffer(size_t bytes);
  ~LargePageBuffer();
  LargePageBuffer(LargePageBuffer&& o) noexcept { swap(o); }
  LargePageBuffer& operator=(LargePageBuffer&& o) noexcept {
    swap(o);
    return *this;
  }

  uint8_t* data() const { return data_; }

 private:
  void swap(LargePageBuffer& o) noexcept {
    std::swap(base_, o.base_);
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
  }
  uint8_t* base_ = nullptr;  // of the mapping, which starts up to 2 MiB before data_
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ts
