// Weight memory: releasing mapped pages after repacking, and the large-page buffers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <vector>

#include "core/mapped_file.h"
#include "resident_memory.h"

namespace ts {
namespace {

TEST(MappedFile, ReleasedPagesStopCountingAndReadBackUnchanged) {
  const auto path = std::filesystem::temp_directory_path() / ("ts_mapped_" + std::to_string(::getpid()));
  std::vector<uint8_t> bytes(16 << 20);
  std::iota(bytes.begin(), bytes.end(), uint8_t{7});
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  {
    const MappedFile file(path.string());
    const std::span<const uint8_t> m = file.bytes();
    const long page = ::sysconf(_SC_PAGESIZE);
    unsigned sum = 0;
    for (size_t i = 0; i < m.size(); i += static_cast<size_t>(page)) sum += m[i];  // fault every page in
    const long before = resident_bytes();
    release_pages(m.data() + 100, m.size() - 200);  // not page-aligned: only whole pages inside go
    const long released = before - resident_bytes();
    EXPECT_GT(released, static_cast<long>(m.size()) * 9 / 10);
    EXPECT_TRUE(std::equal(m.begin(), m.end(), bytes.begin()));  // faulted back in from the file
    EXPECT_GT(sum, 0u);
  }
  std::filesystem::remove(path);
}

TEST(LargePageBuffer, IsZeroedWritableAndHugePageAligned) {
  LargePageBuffer buf(3 << 20);
  ASSERT_NE(buf.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf.data()) % (uintptr_t{2} << 20), 0u);
  EXPECT_TRUE(std::all_of(buf.data(), buf.data() + (3 << 20), [](uint8_t b) { return b == 0; }));
  buf.data()[(3 << 20) - 1] = 5;
  LargePageBuffer moved = std::move(buf);
  EXPECT_EQ(moved.data()[(3 << 20) - 1], 5);
  EXPECT_EQ(buf.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from buffer is empty
}

// Sized far beyond what is written, a ZeroedArray costs the pages written: 4 KiB granules, not the
// 2 MiB pages a LargePageBuffer asks for.
TEST(ZeroedArray, ResidentOnlyWhereWritten) {
  const size_t n = size_t{256} << 20;  // 1 GiB of floats
  const long before = resident_bytes();
  ZeroedArray<float> a(n);
  EXPECT_EQ(a.size(), n);
  EXPECT_EQ(a[n - 1], 0.0f);  // reading a zero page maps it shared, not resident per page
  for (size_t i = 0; i < n; i += n / 64) a[i] = float(i);  // 64 pages, 64 MiB apart
  const long grown = resident_bytes() - before;
  EXPECT_LT(grown, 8l << 20);  // 64 x 4 KiB plus noise; 2 MiB pages would be 128 MiB
  EXPECT_EQ(a[n / 64], float(n / 64));
  EXPECT_EQ(a[n / 64 + 1], 0.0f);
}

}  // namespace
}  // namespace ts
