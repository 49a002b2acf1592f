#pragma once
// Memory of model weights: a read-only map of the whole file (weights used in place), and large-page
// buffers for the copies repacked at load.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
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

// Drops the resident pages lying wholly inside [p, p + n): of a read-only file mapping, bytes
// already copied elsewhere stop counting towards resident memory (touched again, they fault back
// in from the file); of anonymous memory, the bytes are freed and read as zeros.
void release_pages(const void* p, size_t n);
// From now on, the pages of [p, p + n) are 4 KiB pages (those already resident stay as they are):
// for anonymous memory whose written part should not make the 2 MiB around it resident.
void use_small_pages(const void* p, size_t n);
// The reverse: 2 MiB pages where they fit (advisory too).
void use_huge_pages(const void* p, size_t n);

// Zeroed anonymous memory that the kernel may back with 2 MiB pages (transparent huge pages in
// "madvise" mode): weights streamed once per token then cost a few TLB misses instead of one per 4 KiB.
class LargePageBuffer {
 public:
  LargePageBuffer() = default;
  // small_pages: 4 KiB pages only, for arrays whose resident memory should follow closely how
  // much of them is written (a 2 MiB page becomes resident whole on its first write).
  explicit LargePageBuffer(size_t bytes, bool small_pages = false);
  ~LargePageBuffer();
  LargePageBuffer(LargePageBuffer&& o) noexcept { swap(o); }
  LargePageBuffer& operator=(LargePageBuffer&& o) noexcept {
    swap(o);
    return *this;
  }

  uint8_t* data() const { return data_; }
  // The bytes of the buffer's pages that are resident now (mincore): what it costs in memory.
  size_t resident_bytes() const;

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

// n zero-valued T in small pages: memory is resident only where elements are written, so an array
// sized for the whole context costs what the positions used so far cost. T must be an aggregate of
// scalars (all-zero bytes its zero value).
template <class T>
class ZeroedArray {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

 public:
  ZeroedArray() = default;
  explicit ZeroedArray(size_t n) : buffer_(n * sizeof(T), /*small_pages=*/true), n_(n) {}

  T* data() { return reinterpret_cast<T*>(buffer_.data()); }
  const T* data() const { return reinterpret_cast<const T*>(buffer_.data()); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  size_t size() const { return n_; }
  size_t resident_bytes() const { return buffer_.resident_bytes(); }

 private:
  LargePageBuffer buffer_;
  size_t n_ = 0;
};

}  // namespace ts
