// Prefault (common/prefault.hpp) fills in fresh buffers' pages on a thread
// of its own while this one writes them: the contents must never change,
// whoever touches a page first, and the pages must end up resident.
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstddef>
#include <thread>
#include <vector>

#include "common/prefault.hpp"

using davincirun::detail::Prefault;

namespace {

constexpr std::size_t page = 4096;

// A fresh private mapping, unmapped at the end.
struct Mapping {
  explicit Mapping(std::size_t size)
      : bytes(size), data(::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)) {}
  ~Mapping() { ::munmap(data, bytes); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  unsigned char* at(std::size_t offset) const { return static_cast<unsigned char*>(data) + offset; }
  std::size_t bytes;
  void* data;
};

// How many of the mapping's pages are in memory (mincore).
std::size_t resident_pages(const Mapping& mapping) {
  std::vector<unsigned char> in_core(mapping.bytes / page);
  REQUIRE(::mincore(mapping.data, mapping.bytes, in_core.data()) == 0);
  std::size_t n = 0;
  for (const unsigned char flags : in_core) n += flags & 1U;
  return n;
}

// Whether this kernel fills in page tables on request (Linux 5.14): refused
// by older ones, taken and ignored by qemu-user.
bool kernel_populates() {
  const Mapping probe(page);
  return ::madvise(probe.data, page, 23 /* MADV_POPULATE_WRITE */) == 0 && resident_pages(probe) == 1;
}

}  // namespace

TEST_CASE("Prefault fills in fresh pages without changing what this thread writes meanwhile", "[prefault]") {
  const std::size_t size = std::size_t{16} << 20;
  const Mapping first(size), second(size);
  REQUIRE(first.data != MAP_FAILED);
  REQUIRE(second.data != MAP_FAILED);
  {
    const Prefault prefault({{first.data, size}, {second.data, size}});
    // Written from the front while the other thread fills from the front too.
    for (std::size_t i = 0; i < size; i += 64) *first.at(i) = static_cast<unsigned char>(i / 64 % 251 + 1);
    if (kernel_populates()) {
      // Let it reach the second area's end before the destructor stops it.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (resident_pages(second) < size / page && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }
  std::size_t changed = 0;
  for (std::size_t i = 0; i < size; i += 64) changed += *first.at(i) != static_cast<unsigned char>(i / 64 % 251 + 1);
  CHECK(changed == 0);
  if (!kernel_populates()) {
    WARN("this kernel refuses MADV_POPULATE_WRITE: Prefault does nothing here");
    return;
  }
  CHECK(resident_pages(second) == size / page);
  std::size_t nonzero = 0;
  for (std::size_t i = 0; i < size; ++i) nonzero += *second.at(i) != 0;
  CHECK(nonzero == 0);  // filled in, still zero
}

TEST_CASE("Prefault stops where it got to and leaves small or unusable areas alone", "[prefault]") {
  const Mapping small(std::size_t{1} << 20);
  REQUIRE(small.data != MAP_FAILED);
  {
    const Prefault prefault({{small.data, small.bytes}});  // below min_bytes: no thread
  }
  CHECK(resident_pages(small) == 0);
  // Unaligned ends and null areas: only the whole pages inside, nothing outside.
  const std::size_t size = std::size_t{8} << 20;
  const Mapping large(size);
  REQUIRE(large.data != MAP_FAILED);
  { const Prefault prefault({{nullptr, size}, {large.at(100), size - 200}}); }
  std::vector<unsigned char> in_core(size / page);
  REQUIRE(::mincore(large.data, size, in_core.data()) == 0);
  CHECK((in_core.front() & 1U) == 0);  // the page holding byte 100 is not whole inside the area
  CHECK((in_core.back() & 1U) == 0);
}
