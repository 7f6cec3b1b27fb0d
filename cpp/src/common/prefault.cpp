#include "common/prefault.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <system_error>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // linux/mman.h since 5.14; older C libraries' headers lack it
#endif

namespace davincirun::detail {

namespace {

constexpr std::uintptr_t page = 4096;

// The whole pages inside `area`: their first byte and their length.
FreshArea whole_pages(const FreshArea& area) {
  if (area.data == nullptr) return {};
  // Offsets from `data` (no pointer made from an integer); madvise wants whole pages.
  const auto address = reinterpret_cast<std::uintptr_t>(area.data);
  const std::uintptr_t skip = (page - address % page) % page;
  if (area.bytes <= skip) return {};
  return {static_cast<char*>(area.data) + skip, (area.bytes - skip) / page * page};
}

// Fills the areas in order, in slices: the kernel holds the address space's
// lock for reading through one call, and the other thread's mmap or brk (a
// malloc) would wait for all of it; and `stop` is seen between them.
void populate(const FreshArea* areas, std::size_t n, const std::atomic<bool>& stop) noexcept {
  constexpr std::size_t slice = std::size_t{256} << 10;
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t done = 0; done < areas[a].bytes; done += slice) {
      if (stop.load(std::memory_order_relaxed)) return;
      const std::size_t bytes = std::min(slice, areas[a].bytes - done);
      if (::madvise(static_cast<char*>(areas[a].data) + done, bytes, MADV_POPULATE_WRITE) != 0) return;
    }
  }
}

}  // namespace

Prefault::Prefault(std::initializer_list<FreshArea> areas) noexcept {
  std::size_t total = 0;
  for (const FreshArea& area : areas) {
    if (n_ == max_areas) break;
    const FreshArea pages = whole_pages(area);
    if (pages.bytes == 0) continue;
    areas_[n_++] = pages;
    total += pages.bytes;
  }
  if (total < min_bytes) return;
  try {
    thread_ = std::thread([this] { populate(areas_, n_, stop_); });
  } catch (const std::system_error&) {
    n_ = 0;  // no thread to be had: the pages fault in as they are written
  }
}

Prefault::~Prefault() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
}

}  // namespace davincirun::detail
