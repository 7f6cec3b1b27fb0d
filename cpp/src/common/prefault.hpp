// Fresh memory costs a page fault per 4 KiB page on first write (the kernel
// zeroes the page then: ~1.2 us each here, 4 ms of the 9 ms simdjson takes to
// parse a 65,536-rank table into new buffers). Prefault takes those faults on
// a second thread while this one works: the buffers' pages are filled in
// ahead of it, on the other core.
#pragma once

#include <atomic>
#include <cstddef>
#include <initializer_list>
#include <thread>

namespace davincirun::detail {

/// A buffer to fill in: `bytes` from `data` (whole pages inside it only).
struct FreshArea {
  void* data = nullptr;
  std::size_t bytes = 0;
};

/// Fills in the page tables of `areas`, in order, on a thread of its own
/// (madvise MADV_POPULATE_WRITE, Linux 5.14; older kernels refuse it and
/// qemu-user ignores it: nothing is done). Contents are never changed: this thread
/// may write the areas meanwhile, and whichever touches a page first takes
/// its fault. Does nothing below min_bytes in all (a thread costs ~50 us),
/// or when no thread can be started: only speed is at stake. The destructor
/// stops the thread where it got to (within a 256 KiB slice) and waits for
/// it: what is not filled in yet faults in as it is written.
class Prefault {
 public:
  static constexpr std::size_t min_bytes = std::size_t{4} << 20;

  explicit Prefault(std::initializer_list<FreshArea> areas) noexcept;
  ~Prefault();
  Prefault(const Prefault&) = delete;
  Prefault& operator=(const Prefault&) = delete;

 private:
  static constexpr std::size_t max_areas = 4;
  FreshArea areas_[max_areas] = {};  // whole pages
  std::size_t n_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace davincirun::detail
